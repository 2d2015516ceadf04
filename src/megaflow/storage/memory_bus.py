"""In-process event bus on asyncio queues: the embedded default.

Each subscription has a bounded buffer. A publisher that finds a buffer full
waits for that subscriber (backpressure), so memory never grows without
limit; a subscriber that must never slow publishers down can ask for
``overflow="drop_oldest"`` and read ``dropped`` to see what it lost.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from typing import Literal

from megaflow.core.events import Event
from megaflow.storage.abstract import EventBus, Subscription

Overflow = Literal["block", "drop_oldest"]


class MemorySubscription(Subscription):
    def __init__(
        self, bus: MemoryEventBus, kinds: frozenset[str] | None, maxsize: int, overflow: Overflow
    ) -> None:
        if maxsize < 1:
            raise ValueError(f"subscription maxsize must be at least 1, got {maxsize}")
        self._bus = bus
        self.kinds = kinds
        self.overflow = overflow
        self.queue: asyncio.Queue[Event] = asyncio.Queue(maxsize)
        self.dropped = 0
        self.closed = False

    def wants(self, event: Event) -> bool:
        return self.kinds is None or event.kind in self.kinds

    async def deliver(self, event: Event) -> None:
        if self.overflow == "block":
            await self.queue.put(event)
            return
        while self.queue.full():
            self.queue.get_nowait()
            self.dropped += 1
        self.queue.put_nowait(event)

    async def get(self, timeout: float | None = None) -> Event:
        if timeout is None:
            return await self.queue.get()
        return await asyncio.wait_for(self.queue.get(), timeout)

    async def __anext__(self) -> Event:
        if self.closed and self.queue.empty():
            raise StopAsyncIteration
        return await self.queue.get()

    def __aiter__(self) -> AsyncIterator[Event]:
        return self

    async def close(self) -> None:
        self.closed = True
        self._bus.unsubscribe(self)


class MemoryEventBus(EventBus):
    def __init__(self) -> None:
        self._subs: list[MemorySubscription] = []
        self.published = 0

    async def publish(self, event: Event) -> None:
        self.published += 1
        for sub in list(self._subs):
            if sub.wants(event):
                await sub.deliver(event)

    async def subscribe(
        self,
        kinds: Iterable[str] | None = None,
        maxsize: int = 1024,
        overflow: Overflow = "block",
    ) -> MemorySubscription:
        sub = MemorySubscription(
            self, None if kinds is None else frozenset(kinds), maxsize, overflow
        )
        self._subs.append(sub)
        return sub

    def unsubscribe(self, sub: MemorySubscription) -> None:
        if sub in self._subs:
            self._subs.remove(sub)

    async def stop(self) -> None:
        for sub in list(self._subs):
            await sub.close()

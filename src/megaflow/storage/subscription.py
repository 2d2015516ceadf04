"""The buffered subscription both event buses hand out.

Events wait in a bounded asyncio queue. With ``overflow="block"`` a full
buffer makes the deliverer wait (backpressure); with ``"drop_oldest"`` the
oldest buffered events make room and are counted in ``dropped``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Literal

from megaflow.core.events import Event
from megaflow.storage.abstract import Subscription

Overflow = Literal["block", "drop_oldest"]


class BufferedSubscription(Subscription):
    """Filtering by kind, the bounded buffer, and reading from it; a bus
    subclasses it with how events arrive and how ``close`` lets go."""

    def __init__(self, kinds: frozenset[str] | None, maxsize: int, overflow: Overflow) -> None:
        self.kinds = kinds
        self.overflow = overflow
        self.queue: asyncio.Queue[Event] = asyncio.Queue(maxsize)
        self.dropped = 0
        self.closed = False

    def wants(self, event: Event) -> bool:
        return self.kinds is None or event.kind in self.kinds

    async def deliver(self, event: Event, *, wait: bool = True) -> None:
        """Buffer ``event``; ``wait=False`` drops the oldest even when blocking."""
        if self.overflow == "block" and wait:
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

"""In-process event bus on asyncio queues: the embedded default.

Each subscription has a bounded buffer. A publisher that finds a buffer full
waits for that subscriber (backpressure), so memory never grows without
limit; a subscriber that must never slow publishers down can ask for
``overflow="drop_oldest"`` and read ``dropped`` to see what it lost.
:meth:`MemoryEventBus.listens` knows its subscribers, so a publisher can skip
building events of a kind nobody reads.
"""

from __future__ import annotations

from collections.abc import Iterable

from megaflow.core.events import Event
from megaflow.storage.abstract import EventBus
from megaflow.storage.subscription import BufferedSubscription, Overflow


class MemorySubscription(BufferedSubscription):
    def __init__(
        self, bus: MemoryEventBus, kinds: frozenset[str] | None, maxsize: int, overflow: Overflow
    ) -> None:
        if maxsize < 1:
            raise ValueError(f"subscription maxsize must be at least 1, got {maxsize}")
        super().__init__(kinds, maxsize, overflow)
        self._bus = bus

    async def close(self) -> None:
        self.closed = True
        self._bus.unsubscribe(self)


class MemoryEventBus(EventBus):
    def __init__(self) -> None:
        self._subs: list[MemorySubscription] = []
        self._listening: dict[str, bool] = {}
        """``listens`` by kind, until the subscriptions change."""
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
        self._listening.clear()
        return sub

    def unsubscribe(self, sub: MemorySubscription) -> None:
        if sub in self._subs:
            self._subs.remove(sub)
            self._listening.clear()

    def listens(self, kind: str) -> bool:
        known = self._listening.get(kind)
        if known is None:
            known = self._listening[kind] = any(
                s.kinds is None or kind in s.kinds for s in self._subs
            )
        return known

    async def stop(self) -> None:
        for sub in list(self._subs):
            await sub.close()

"""Many deadlines on one timer: the start timeout and the task deadline of attempts.

Nearly every attempt arms a start timeout and a deadline and disarms both
moments later. One ``call_later`` handle per deadline costs a handle, a
context copy and a heap entry in the event loop each time; :class:`Deadlines`
keeps its own heap of plain tuples and one loop timer for the earliest live
deadline. Disarming is O(1) (the heap entry is skipped when it surfaces);
the heap is rebuilt when dead entries outnumber live ones.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable

_RESOLUTION = time.get_clock_info("monotonic").resolution

Fire = Callable[[str, float], None]
"""Called with the key and the ``seconds`` it was added with."""


class Deadlines:
    """``add(key, seconds)`` calls ``fire(key, seconds)`` after ``seconds`` unless
    ``discard(key)`` came first. Adding a key again replaces its deadline."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fire: Fire) -> None:
        self._loop = loop
        self._fire = fire
        self._heap: list[tuple[float, int, str, float]] = []
        self._live: dict[str, int] = {}
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, key: str) -> bool:
        return key in self._live

    def add(self, key: str, seconds: float) -> None:
        when = self._loop.time() + seconds
        seq = next(self._seq)
        self._live[key] = seq
        heap = self._heap
        heapq.heappush(heap, (when, seq, key, seconds))
        if self._timer is None or when < self._timer_at:
            self._arm(when)
        elif len(heap) > 2 * len(self._live) + 64:
            self._compact()

    def discard(self, key: str) -> None:
        self._live.pop(key, None)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._heap.clear()
        self._live.clear()

    def _compact(self) -> None:
        live = self._live
        self._heap = [e for e in self._heap if live.get(e[2]) == e[1]]
        heapq.heapify(self._heap)

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = when
        self._timer = self._loop.call_at(when, self._due)

    def _due(self) -> None:
        self._timer = None
        heap, live = self._heap, self._live
        now = self._loop.time() + _RESOLUTION
        due: list[tuple[str, float]] = []
        while heap and heap[0][0] <= now:
            _, seq, key, seconds = heapq.heappop(heap)
            if live.get(key) == seq:
                del live[key]
                due.append((key, seconds))
        while heap and live.get(heap[0][2]) != heap[0][1]:
            heapq.heappop(heap)
        if heap:
            self._arm(heap[0][0])
        for key, seconds in due:
            self._fire(key, seconds)

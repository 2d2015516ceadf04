"""In-process priority task queue: the embedded default.

A binary heap ordered by (priority descending, arrival ascending). Removal
for cancellation is lazy: removed ids are skipped when they reach the top,
so ``remove`` is O(1) and ``pop`` stays O(log n). The queue is not durable
by itself; :func:`megaflow.storage.recovery.recover_queue` rebuilds it from
the metadata store after a restart.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from operator import attrgetter

from megaflow.storage.abstract import QueuedTask, TaskQueue

_sort_key = attrgetter("sort_key")


class MemoryTaskQueue(TaskQueue):
    def __init__(self) -> None:
        self._heap: list[QueuedTask] = []
        self._live: dict[str, QueuedTask] = {}

    async def push(self, items: Sequence[QueuedTask]) -> None:
        for item in items:
            if item.task_id in self._live:
                continue  # already queued: pushing twice must not run a task twice
            self._live[item.task_id] = item
            heapq.heappush(self._heap, item)

    def _drop_dead_top(self) -> None:
        heap = self._heap
        while heap and self._live.get(heap[0].task_id) is not heap[0]:
            heapq.heappop(heap)

    async def pop(self, n: int = 1) -> list[QueuedTask]:
        if n >= len(self._live):
            # Everything: one sort instead of a heap pop (and its comparisons) per entry.
            every = sorted(self._live.values(), key=_sort_key)
            self._live.clear()
            self._heap.clear()
            return every
        out: list[QueuedTask] = []
        while len(out) < n:
            self._drop_dead_top()
            if not self._heap:
                break
            item = heapq.heappop(self._heap)
            del self._live[item.task_id]
            out.append(item)
        return out

    async def peek(self, n: int = 1) -> list[QueuedTask]:
        self._drop_dead_top()
        if n == 1:
            return self._heap[:1]
        return heapq.nsmallest(n, self._live.values())

    async def remove(self, task_ids: Iterable[str]) -> int:
        found = 0
        for task_id in task_ids:
            if self._live.pop(task_id, None) is not None:
                found += 1
        if len(self._heap) > 2 * len(self._live) + 64:
            self._heap = list(self._live.values())
            heapq.heapify(self._heap)
        return found

    async def size(self) -> int:
        return len(self._live)

    def __len__(self) -> int:
        return len(self._live)

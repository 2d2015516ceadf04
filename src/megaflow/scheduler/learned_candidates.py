"""The learned policy's candidate prefilter when many classes wait.

Up to :data:`EXACT_UP_TO` classes, :class:`~megaflow.scheduler.learned.LearnedPolicy`
scans every class head each decision and keeps the oldest heads and those of
least predicted work exactly. Beyond that a scan per decision would cost more
than the decision budget (300 classes take about a millisecond in Python), so
two orderings are kept instead:

- :class:`ClassAges`: a heap of (head's arrival sequence, class), told every
  time a class's head changes; stale entries are dropped as they surface, so
  the oldest ``n`` heads cost about ``n`` heap operations.
- :class:`WorkOrder`: the classes sorted by predicted work (CPU x predicted
  run time), re-sorted after every doubling of the finished placements up to
  each 256 of them, with classes that appeared since then tried first.
  Between re-sorts the order can be a little stale; the network still sees
  fresh predictions in the features of the candidates it gets.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable, Mapping
from typing import Generic, TypeVar

from megaflow.scheduler.abstract import PendingTask

EXACT_UP_TO = 64
"""Classes up to which every head is scanned each decision."""
K = TypeVar("K", bound=Hashable)
Head = Callable[[K], PendingTask | None]
"""A class's head task (None when it emptied; dropping it is the caller's job)."""


class ClassAges(Generic[K]):
    """The oldest class heads, from a heap with lazy deletion."""

    def __init__(self, classes: Mapping[K, object], head: Head[K]) -> None:
        self._classes = classes
        self._head = head
        self._heap: list[tuple[int, int, K]] = []
        self._n = 0

    def moved(self, key: K, seq: int) -> None:
        """The head of class ``key`` now has arrival sequence ``seq``."""
        self._n += 1
        heapq.heappush(self._heap, (seq, self._n, key))
        if len(self._heap) > 4 * len(self._classes) + 1024:
            self._compact()

    def _compact(self) -> None:
        live = []
        for key in list(self._classes):
            task = self._head(key)
            if task is not None:
                self._n += 1
                live.append((task.seq, self._n, key))
        heapq.heapify(live)
        self._heap = live

    def oldest(self, n: int, skip: set[K]) -> list[tuple[K, PendingTask]]:
        """Up to ``n`` heads by arrival, oldest first, leaving out the classes in ``skip``."""
        heap = self._heap
        got: list[tuple[K, PendingTask]] = []
        seen: set[K] = set()
        keep: list[tuple[int, int, K]] = []
        while heap and len(got) < n:
            entry = heapq.heappop(heap)
            seq, _, key = entry
            if key in seen or key not in self._classes:
                continue
            task = self._head(key)
            if task is None or task.seq != seq:
                continue  # stale: the class moved on (its new head has an entry)
            seen.add(key)
            keep.append(entry)
            if key not in skip:
                got.append((key, task))
        for entry in keep:
            heapq.heappush(heap, entry)
        return got


class WorkOrder(Generic[K]):
    """Classes by predicted work, re-sorted now and then."""

    def __init__(
        self, classes: Mapping[K, object], head: Head[K], work: Callable[[K], float],
        observed: Callable[[], int],
    ) -> None:  # fmt: skip
        self._classes = classes
        self._head = head
        self._work = work
        self._observed = observed
        self.fresh: list[K] = []
        """Classes made since the last sort; tried first (no estimate is work 0)."""
        self._order: list[K] | None = None
        self._sorted_at = 0
        self._misses = 0

    def _due(self) -> bool:
        since = self._observed() - self._sorted_at
        return self._order is None or since >= min(256, max(8, self._sorted_at))

    def least(self, n: int, skip: set[K]) -> list[tuple[K, PendingTask]]:
        """Up to ``n`` heads of least predicted work, leaving out the classes in ``skip``."""
        if self._due() or self._misses > 1024 or len(self.fresh) > 1024:
            self._order = sorted(self._classes, key=self._work)
            self._sorted_at, self._misses = self._observed(), 0
            self.fresh = []
        assert self._order is not None
        got: list[tuple[K, PendingTask]] = []
        seen = set(skip)
        for key in itertools.chain(self.fresh, self._order):
            if key in seen:
                continue
            seen.add(key)
            task = self._head(key) if key in self._classes else None
            if task is None:
                self._misses += 1
                continue
            got.append((key, task))
            if len(got) == n:
                break
        return got

"""The built-in scheduling policies, and the per-type weighted queues.

- :class:`FifoPolicy`: arrival order.
- :class:`PriorityPolicy`: higher priority first, with linear aging. A task's
  effective priority is ``priority + aging * (now - enqueued_at)``; since
  ``aging * now`` is the same for every task, ordering by
  ``priority - aging * enqueued_at`` is the same order and never changes, so
  a heap keeps it without re-sorting as time passes.
- :class:`FairPolicy`: deficit round robin over runs or tenants, each key
  served in proportion to its weight.
- :class:`TypedQueues`: one inner policy per task type, served by deficit
  round robin over the configured type weights.
- ``learned``: :class:`~megaflow.scheduler.learned.LearnedPolicy`, built from
  its checkpoint (read once per factory, numpy only).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from typing import Any

from megaflow.core.errors import ConfigError
from megaflow.core.plugins import load_class
from megaflow.core.tasks import TaskSpec
from megaflow.scheduler.abstract import PendingTask, SchedulingPolicy, TaskFeedback
from megaflow.scheduler.config import (
    CustomPolicyConfig,
    FairPolicyConfig,
    FifoPolicyConfig,
    LearnedPolicyConfig,
    PolicyConfig,
    PriorityPolicyConfig,
)


class FifoPolicy(SchedulingPolicy):
    """First come, first served (by arrival sequence)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._heap: list[tuple[int, PendingTask]] = []

    def push(self, task: PendingTask) -> None:
        heapq.heappush(self._heap, (task.seq, task))

    def pop(self) -> PendingTask | None:
        return heapq.heappop(self._heap)[1] if self._heap else None


class PriorityPolicy(SchedulingPolicy):
    """Highest effective priority first; ties by arrival."""

    def __init__(self, aging_per_s: float = 0.1, **options: Any) -> None:
        super().__init__(**options)
        self.aging_per_s = float(aging_per_s)
        self._heap: list[tuple[float, int, PendingTask]] = []

    def base_priority(self, spec: TaskSpec) -> float:
        """The priority before aging; override to boost some tasks."""
        return float(spec.priority)

    def priority_of(self, spec: TaskSpec) -> float:
        return self.base_priority(spec)

    def effective(self, task: PendingTask, now: float) -> float:
        return self.base_priority(task.spec) + self.aging_per_s * (now - task.enqueued_at)

    def push(self, task: PendingTask) -> None:
        key = -(self.base_priority(task.spec) - self.aging_per_s * task.enqueued_at)
        heapq.heappush(self._heap, (key, task.seq, task))

    def pop(self) -> PendingTask | None:
        return heapq.heappop(self._heap)[2] if self._heap else None


class _Drr:
    """Deficit round robin over keys; each key's tasks kept in an inner order."""

    def __init__(self, weight: Callable[[str], float], inner: Callable[[], SchedulingPolicy]):
        self._weight = weight
        self._inner = inner
        self.queues: dict[str, SchedulingPolicy] = {}
        self._count: dict[str, int] = {}
        self._deficit: dict[str, float] = {}
        self._ring: deque[str] = deque()

    def push(self, key: str, task: PendingTask) -> None:
        q = self.queues.get(key)
        if q is None:
            q = self.queues[key] = self._inner()
            self._count[key] = 0
        q.push(task)
        self._count[key] += 1
        if self._count[key] == 1:
            self._deficit[key] = 0.0
            self._ring.append(key)

    def pop(self) -> PendingTask | None:
        ring = self._ring
        while ring:
            key = ring[0]
            if self._deficit[key] >= 1.0:
                task = self.queues[key].pop()
                if task is None:  # cannot happen while the count is positive
                    ring.popleft()
                    continue
                self._deficit[key] -= 1.0
                self._count[key] -= 1
                if self._count[key] == 0:
                    ring.popleft()
                    self._deficit[key] = 0.0
                return task
            self._deficit[key] += self._weight(key)
            ring.rotate(-1)
        return None

    def push_back(self, key: str, tasks: list[PendingTask]) -> None:
        """Undo pops: the key gets its tasks back and its deficit refunded."""
        was_active = self._count.get(key, 0) > 0
        for task in tasks:
            self.queues[key].push(task)
        self._count[key] = self._count.get(key, 0) + len(tasks)
        if was_active:
            self._deficit[key] += len(tasks)
        elif tasks:
            self._deficit[key] = float(len(tasks))
            self._ring.appendleft(key)


class FairPolicy(SchedulingPolicy):
    """Weighted fair share across runs or tenants (deficit round robin)."""

    def __init__(
        self, key: str = "run", weights: dict[str, float] | None = None, **options: Any
    ) -> None:
        super().__init__(**options)
        self.key = key
        self.weights = dict(weights or {})
        self._drr = _Drr(lambda k: self.weights.get(k, 1.0), FifoPolicy)

    def key_of(self, spec: TaskSpec) -> str:
        return spec.run_id if self.key == "run" else spec.tenant

    def push(self, task: PendingTask) -> None:
        self._drr.push(self.key_of(task.spec), task)

    def pop(self) -> PendingTask | None:
        return self._drr.pop()

    def push_back(self, tasks: list[PendingTask]) -> None:
        by_key: dict[str, list[PendingTask]] = {}
        for task in tasks:
            by_key.setdefault(self.key_of(task.spec), []).append(task)
        for key, group in by_key.items():
            self._drr.push_back(key, group)


class TypedQueues(SchedulingPolicy):
    """An independent queue per task type, served in proportion to type weights."""

    def __init__(self, make: Callable[[], SchedulingPolicy], weights: dict[str, float]) -> None:
        super().__init__()
        self._make = make
        self.weights = weights
        self._drr = _Drr(lambda k: self.weights.get(k, 1.0), make)
        self._probe = make()

    @staticmethod
    def type_of(spec: TaskSpec) -> str:
        return spec.type.value if spec.type is not None else "untyped"

    def push(self, task: PendingTask) -> None:
        self._drr.push(self.type_of(task.spec), task)

    def pop(self) -> PendingTask | None:
        return self._drr.pop()

    def push_back(self, tasks: list[PendingTask]) -> None:
        by_key: dict[str, list[PendingTask]] = {}
        for task in tasks:
            by_key.setdefault(self.type_of(task.spec), []).append(task)
        for key, group in by_key.items():
            self._drr.push_back(key, group)

    def priority_of(self, spec: TaskSpec) -> float:
        return self._probe.priority_of(spec)

    def observe(self, feedback: TaskFeedback) -> None:
        inner = self._drr.queues.get(self.type_of(feedback.task.spec))
        if inner is not None:
            inner.observe(feedback)


def policy_factory(cfg: PolicyConfig) -> Callable[[], SchedulingPolicy]:
    """A function that builds a fresh policy from its config (one per queue)."""
    if isinstance(cfg, FifoPolicyConfig):
        return FifoPolicy
    if isinstance(cfg, PriorityPolicyConfig):
        aging = cfg.aging_per_s
        return lambda: PriorityPolicy(aging_per_s=aging)
    if isinstance(cfg, FairPolicyConfig):
        key, weights = cfg.key, cfg.weights
        return lambda: FairPolicy(key=key, weights=weights)
    if isinstance(cfg, LearnedPolicyConfig):
        from megaflow.scheduler.learned import learned_factory

        return learned_factory(cfg)
    if isinstance(cfg, CustomPolicyConfig):
        cls = load_class(cfg.path, SchedulingPolicy)  # type: ignore[type-abstract]
        options = cfg.options
        return lambda: cls(**options)
    raise TypeError(f"unknown policy config {cfg!r}")


def make_policy(
    cfg: PolicyConfig, queues: str = "shared", weights: dict[str, float] | None = None
) -> SchedulingPolicy:
    """The policy of one region's queue: shared, or one per task type."""
    if queues == "per_type" and isinstance(cfg, LearnedPolicyConfig):
        raise ConfigError(
            "scheduler.policy: the learned policy orders one shared queue; "
            "use queues: shared with it"
        )
    make = policy_factory(cfg)
    if queues == "per_type":
        return TypedQueues(make, weights or {})
    return make()

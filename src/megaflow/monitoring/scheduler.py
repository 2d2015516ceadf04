"""Prometheus metrics of the control plane, on a registry passed in.

Queue depth, tasks by state, task duration, errors by kind and the
fragmentation figure. Nothing is registered globally: the caller owns the
:class:`~prometheus_client.CollectorRegistry` and serves it.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_DURATION_BUCKETS = (0.01, 0.1, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200)


class SchedulerMetrics:
    def __init__(self, registry: CollectorRegistry, namespace: str = "megaflow") -> None:
        self.registry = registry
        self._states_seen: set[str] = set()
        self.queue_depth = Gauge(
            "scheduler_queue_depth",
            "Tasks waiting to be placed.",
            namespace=namespace,
            registry=registry,
        )
        self.tasks = Gauge(
            "scheduler_tasks",
            "Tasks known to the scheduler, by state.",
            ["state"],
            namespace=namespace,
            registry=registry,
        )
        self.duration = Histogram(
            "scheduler_task_duration_seconds",
            "Time from placement to the end of an attempt.",
            ["outcome"],
            buckets=_DURATION_BUCKETS,
            namespace=namespace,
            registry=registry,
        )
        self.errors = Counter(
            "scheduler_errors",
            "Failed attempts, by error kind.",
            ["kind"],
            namespace=namespace,
            registry=registry,
        )
        self.fragmentation = Gauge(
            "scheduler_fragmentation_ratio",
            "Free CPU that the smallest queued task cannot use, over all free CPU.",
            namespace=namespace,
            registry=registry,
        )
        self.decisions = Counter(
            "scheduler_decisions",
            "Placement decisions made.",
            namespace=namespace,
            registry=registry,
        )

    def set_states(self, counts: Mapping[str, int]) -> None:
        """Tasks by state now; a state reported before and absent from ``counts`` goes to 0
        (the scheduler's counts leave empty states out)."""
        for state in self._states_seen - counts.keys():
            self.tasks.labels(state=state).set(0)
        for state, n in counts.items():
            self.tasks.labels(state=state).set(n)
        self._states_seen |= counts.keys()

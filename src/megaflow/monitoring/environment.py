"""Prometheus metrics of the Environment Service, on a registry passed in.

Runtimes and pools take an optional :class:`EnvironmentMetrics` and report
into it; nothing is registered globally, so several runtimes (and tests) can
each have their own registry.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_START_BUCKETS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_FAST_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5, 30, 120)
STATES = ("starting", "ready", "busy", "stopped")


class EnvironmentMetrics:
    """Start, exec and teardown latency; live sandboxes by state; failures by kind."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.start_seconds = Histogram(
            "megaflow_sandbox_start_seconds",
            "Time to get a ready sandbox: 'cold' is a fresh start, 'warm' a pool hit.",
            ["runtime", "kind"],
            buckets=_START_BUCKETS,
            registry=registry,
        )
        self.exec_seconds = Histogram(
            "megaflow_sandbox_exec_seconds",
            "Round trip of one command in a sandbox, as the caller sees it.",
            ["runtime"],
            buckets=_FAST_BUCKETS,
            registry=registry,
        )
        self.teardown_seconds = Histogram(
            "megaflow_sandbox_teardown_seconds",
            "Time to destroy a sandbox and release its resources.",
            ["runtime"],
            buckets=_FAST_BUCKETS,
            registry=registry,
        )
        self.live = Gauge(
            "megaflow_sandboxes",
            "Live sandboxes by state.",
            ["runtime", "state"],
            registry=registry,
        )
        self.failures = Counter(
            "megaflow_sandbox_failures_total",
            "Sandbox failures by kind: start, exec, timeout, oom, teardown, reaped.",
            ["runtime", "kind"],
            registry=registry,
        )
        self.sandbox_cpu = Gauge(
            "megaflow_sandbox_cpu_seconds",
            "CPU time used by one sandbox so far.",
            ["runtime", "sandbox"],
            registry=registry,
        )
        self.sandbox_memory = Gauge(
            "megaflow_sandbox_memory_bytes",
            "Memory used by one sandbox.",
            ["runtime", "sandbox"],
            registry=registry,
        )
        self.image_load_seconds = Histogram(
            "megaflow_sandbox_image_load_seconds",
            "Time to prepare an image on first use (unpack, load or pull).",
            ["runtime"],
            buckets=_START_BUCKETS,
            registry=registry,
        )

    def sandbox_usage(
        self, runtime: str, sandbox_id: str, cpu_seconds: float, memory_bytes: int
    ) -> None:
        """Per-sandbox CPU and memory, as last read from its cgroups."""
        self.sandbox_cpu.labels(runtime, sandbox_id).set(cpu_seconds)
        self.sandbox_memory.labels(runtime, sandbox_id).set(memory_bytes)

    def sandbox_gone(self, runtime: str, sandbox_id: str) -> None:
        for gauge in (self.sandbox_cpu, self.sandbox_memory):
            try:
                gauge.remove(runtime, sandbox_id)
            except KeyError:
                pass

    def moved(self, runtime: str, old: str | None, new: str | None) -> None:
        """A sandbox changed state (None: it did not exist before / exists no more)."""
        if old is not None:
            self.live.labels(runtime, old).dec()
        if new is not None:
            self.live.labels(runtime, new).inc()

    def failed(self, runtime: str, kind: str) -> None:
        self.failures.labels(runtime, kind).inc()

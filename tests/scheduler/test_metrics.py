"""The scheduler's Prometheus metrics, on a registry the caller owns."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from megaflow.core.events import CapacityFreed
from megaflow.monitoring.scheduler import SchedulerMetrics
from megaflow.scheduler.config import RetryConfig, SchedulerConfig
from megaflow.scheduler.service import Scheduler
from megaflow.scheduler.synthetic import FaultExecutor, FaultPlan
from tests.scheduler.helpers import make_stores, run, task, until


async def test_metrics_count_states_errors_durations_and_queue(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    metrics = SchedulerMetrics(registry)
    ex = FaultExecutor(plans={"bad": FaultPlan(then="agent"), "flaky": FaultPlan(infra_failures=1)})
    cfg = SchedulerConfig(retry=RetryConfig(base_s=0.01, max_s=0.01))
    stores = make_stores(tmp_path)
    async with stores, Scheduler(cfg, stores, ex, metrics=metrics) as s:
        await s.submit(run(), [task("ok"), task("bad"), task("flaky")])
        await s.wait("r1")
        # Capacity freed wakes one more round, which publishes the final gauges.
        rounds = s.rounds
        await s.stores.events.publish(CapacityFreed(instance="local"))
        await until(lambda: s.rounds > rounds)

    def value(name: str, **labels: str) -> float:
        got = registry.get_sample_value(name, labels)
        return 0.0 if got is None else got

    assert value("megaflow_scheduler_errors_total", kind="agent") == 1
    assert value("megaflow_scheduler_errors_total", kind="infra") == 1
    assert value("megaflow_scheduler_task_duration_seconds_count", outcome="ok") == 2
    assert value("megaflow_scheduler_decisions_total") == 4
    assert value("megaflow_scheduler_queue_depth") == 0
    text = generate_latest(registry).decode()
    assert "megaflow_scheduler_fragmentation_ratio" in text
    assert value("megaflow_scheduler_tasks", state="succeeded") == 2
    assert value("megaflow_scheduler_tasks", state="failed") == 1

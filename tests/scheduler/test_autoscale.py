"""Autoscaling: the threshold/idle policy, and the scheduler growing its fleet."""

from __future__ import annotations

import asyncio
from pathlib import Path

from megaflow.core.states import TaskState
from megaflow.scheduler.abstract import FleetProvider, InstanceSpec
from megaflow.scheduler.autoscale import StaticFleet, ThresholdAutoscaler, local_instance
from megaflow.scheduler.config import AutoscaleConfig, SchedulerConfig
from megaflow.scheduler.service import Scheduler
from megaflow.scheduler.synthetic import SleepExecutor
from tests.scheduler.helpers import make_stores, run, task, until


def test_scales_up_only_after_a_sustained_queue() -> None:
    a = ThresholdAutoscaler(AutoscaleConfig(enabled=True, queue_threshold=10, sustain_s=30, step=5))
    assert a.evaluate(0.0, 50, 2, []) == (0, [])
    assert a.evaluate(20.0, 50, 2, []) == (0, [])
    assert a.evaluate(31.0, 50, 2, []) == (5, [])
    assert a.evaluate(32.0, 50, 7, []) == (0, [])  # a new window starts
    assert a.evaluate(40.0, 5, 7, []) == (0, [])  # below the threshold: reset
    assert a.evaluate(50.0, 50, 7, []) == (0, [])
    assert a.next_check(50.0) == 80.0


def test_asks_only_for_what_the_queue_needs() -> None:
    a = ThresholdAutoscaler(AutoscaleConfig(enabled=True, queue_threshold=0, sustain_s=0, step=100))
    assert a.evaluate(0.0, 20, 0, [], per_instance=8) == (3, [])
    assert a.evaluate(1.0, 20, 0, [], booting=3, per_instance=8) == (0, [])
    capped = ThresholdAutoscaler(
        AutoscaleConfig(enabled=True, queue_threshold=0, sustain_s=0, max_instances=4)
    )
    assert capped.evaluate(0.0, 100, 3, []) == (1, [])


def test_scales_down_instances_idle_long_enough() -> None:
    cfg = AutoscaleConfig(enabled=True, idle_s=60, min_instances=2)
    a = ThresholdAutoscaler(cfg)
    idle = [("a", 0.0), ("b", 50.0), ("c", 10.0)]
    assert a.evaluate(100.0, 0, 3, idle) == (0, ["a"])  # keeps min_instances
    assert a.evaluate(100.0, 3, 3, idle) == (0, [])  # work waiting: keep them


async def test_static_fleet_never_changes() -> None:
    fleet = StaticFleet([local_instance(4)])
    assert await fleet.scale_up(3) == []
    await fleet.scale_down(["local"])
    assert len(fleet.instances) == 1
    assert fleet.instances[0].slots == 4


class GrowingFleet(FleetProvider):
    def __init__(self) -> None:
        self.granted: list[str] = []
        self.released: list[str] = []

    async def scale_up(self, n: int) -> list[InstanceSpec]:
        new = [f"g{len(self.granted) + k}" for k in range(n)]
        self.granted += new
        return [InstanceSpec(i, cpu=2, memory_mb=4096, slots=2) for i in new]

    async def scale_down(self, ids: list[str]) -> None:
        self.released += ids


async def test_scheduler_grows_the_fleet_and_releases_idle_instances(tmp_path: Path) -> None:
    fleet = GrowingFleet()
    cfg = SchedulerConfig(
        max_concurrency=100,
        autoscale=AutoscaleConfig(
            enabled=True, queue_threshold=0, sustain_s=0, step=10, idle_s=0.05
        ),
    )
    stores = make_stores(tmp_path)
    async with stores, Scheduler(cfg, stores, SleepExecutor(0.05), [], fleet=fleet) as s:
        await s.submit(run(), [task(f"t{i}") for i in range(8)])
        assert await s.wait("r1") == {TaskState.SUCCEEDED: 8}
        assert 1 <= len(fleet.granted) <= 10
        await asyncio.sleep(0.1)
        await s.submit(run("r2"), [])  # any event wakes a round that sees the idle fleet
        await s.wait("r2")
        await until(lambda: bool(fleet.released))
        assert set(fleet.released) <= set(fleet.granted)

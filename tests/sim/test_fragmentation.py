"""Placement on a memory-skewed fleet: tasks of 8-14 GB beside 1-2 GB ones on 32 GB
instances. The learned policy places by best fit on the binding resource and keeps
the free room that no waiting task fits under 10% of the fleet (the seed's target)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from megaflow.core.tasks import Resources, TaskSpec
from megaflow.scheduler.abstract import InstanceSpec
from megaflow.scheduler.fleet import Instance, Region
from megaflow.scheduler.learned import LearnedPolicy
from megaflow.scheduler.learned_net import read_checkpoint
from megaflow.sim.engine import Simulator
from megaflow.sim.families import family

CHECKPOINT = Path(__file__).resolve().parents[2] / "examples/policies/learned.safetensors"


def test_memory_heavy_tasks_go_where_memory_is_tightest() -> None:
    region = Region("r")
    for name, cpu, memory_mb in (("cpu-busy", 6.0, 0), ("memory-busy", 0.0, 16384)):
        inst = Instance.from_spec(InstanceSpec(name, cpu=8, memory_mb=32768, slots=8), 0.0)
        region.add(inst)
        used = Resources.model_construct(cpu=cpu, memory_mb=memory_mb, gpu=0)
        region.reserve(inst, TaskSpec.model_construct(id=f"on-{name}", resources=used))
    # 1 cpu and 14 GB: memory binds (14/32 of an instance against 1/8). It goes where it
    # leaves the least memory over (2 of 16 GB), not where the summed leftover share is
    # least (cpu-busy: 1/8 cpu + 18/32 memory against 7/8 + 2/32), which would strand
    # 18 GB beside 1 free cpu.
    big = region.best_fit(Resources(cpu=1, memory_mb=14336))
    assert big is not None
    assert big.id == "memory-busy"


def test_learned_keeps_fragmentation_under_ten_percent_on_a_memory_skewed_fleet() -> None:
    fam = family("memory-skew")
    net = read_checkpoint(CHECKPOINT)
    for seed in (10_001, 10_002):
        ep = fam.episode(seed)
        assert {t.memory_mb for t in ep.trace} >= {1024, 2048, 8192, 14336}
        sim = Simulator(ep.config, ep.instances, ep.trace, policy=lambda: LearnedPolicy(net))
        report = asyncio.run(sim.run())
        assert report.finished == len(ep.trace)
        assert 0.0 < report.fragmentation < 0.10

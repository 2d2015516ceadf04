"""Ready-made simulation studies: policies side by side, shared against per-type
queues, and end-to-end time as the load and the fleet grow together."""

from __future__ import annotations

import asyncio
import math
import random

from megaflow.core.errors import InvalidInput
from megaflow.scheduler.abstract import InstanceSpec
from megaflow.scheduler.config import (
    AdmissionConfig,
    AutoscaleConfig,
    FairPolicyConfig,
    FifoPolicyConfig,
    LearnedPolicyConfig,
    PolicyConfig,
    PriorityPolicyConfig,
    SchedulerConfig,
)
from megaflow.sim.engine import SimOptions, SimulatedFleet, Simulator
from megaflow.sim.report import SimReport
from megaflow.sim.trace import TraceTask, mean_cpu_seconds, synthetic_trace

INSTANCE = InstanceSpec("template", cpu=8, memory_mb=32768, slots=8)


POLICIES = ("fifo", "priority", "fair", "learned")


def policy_config(name: str, checkpoint: str | None = None) -> PolicyConfig:
    """A policy by name; ``learned`` needs its ``checkpoint``."""
    if name == "learned":
        if checkpoint is None:
            raise InvalidInput("the learned policy needs --checkpoint PATH")
        return LearnedPolicyConfig(checkpoint=checkpoint)
    if name == "fifo":
        return FifoPolicyConfig()
    if name == "priority":
        return PriorityPolicyConfig()
    if name == "fair":
        return FairPolicyConfig()
    raise InvalidInput(f"unknown policy {name!r}; use one of {', '.join(POLICIES)}")


def fleet(n: int, template: InstanceSpec = INSTANCE) -> list[InstanceSpec]:
    t = template
    return [InstanceSpec(f"i{k}", t.region, t.cpu, t.memory_mb, t.gpu, t.slots) for k in range(n)]


def arrival_rate(instances: int, load: float, mix: dict[str, float]) -> float:
    """Arrivals per second that ask for ``load`` times the fleet's CPU."""
    return load * instances * INSTANCE.cpu / mean_cpu_seconds(mix)


def simulate(
    policy: str,
    instances: list[InstanceSpec],
    trace: list[TraceTask],
    *,
    queues: str = "shared",
    preemption: bool = False,
    checkpoint: str | None = None,
) -> SimReport:
    cfg = SchedulerConfig(
        policy=policy_config(policy, checkpoint),
        queues=queues,  # type: ignore[arg-type]
        max_concurrency=1_000_000,
        preemption=preemption,
    )
    return asyncio.run(Simulator(cfg, instances, trace).run())


def compare(
    policies: list[str], instances: int, tasks: int, *, seed: int = 0, load: float = 1.2,
    queues: str = "shared", trace: list[TraceTask] | None = None, checkpoint: str | None = None,
) -> dict[str, SimReport]:  # fmt: skip
    """Every policy on the same trace and fleet."""
    mix = {"train": 0.5, "eval": 0.3, "synth": 0.2}
    if trace is None:
        trace = synthetic_trace(tasks, seed=seed, rate=arrival_rate(instances, load, mix), mix=mix)
    return {
        p: simulate(p, fleet(instances), trace, queues=queues, checkpoint=checkpoint)
        for p in policies
    }


def queue_layout_study(
    instances: int, tasks: int, shares: list[float], *, seed: int = 0, load: float = 1.2,
    policy: str = "priority",
) -> dict[str, SimReport]:  # fmt: skip
    """Shared against per-type queues as the dominant type's share of the mix grows."""
    out: dict[str, SimReport] = {}
    for share in shares:
        rest = (1.0 - share) / 2
        mix = {"train": share, "eval": rest, "synth": rest}
        rate = arrival_rate(instances, load, mix)
        trace = synthetic_trace(tasks, seed=seed, rate=rate, mix=mix)
        for layout in ("shared", "per_type"):
            out[f"train {share:.0%}, {layout}"] = simulate(
                policy, fleet(instances), trace, queues=layout
            )
    return out


def scaling_trace(
    n: int, *, median_s: float = 300.0, sigma: float = 1.0, seed: int = 0
) -> list[TraceTask]:
    """``n`` one-CPU tasks arriving together, with lognormal lengths: median
    ``median_s``, and with ``sigma`` 1.0 a P99 about ten times the median and a
    longest task that grows with ``n``, as agent episodes and test runs have."""
    rng = random.Random(seed)
    return [
        TraceTask(arrival_s=0.0, duration_s=rng.lognormvariate(math.log(median_s), sigma))
        for _ in range(n)
    ]


def scaling_study(
    sizes: list[int], *, median_s: float = 300.0, sigma: float = 1.0, seed: int = 0,
    sandbox_rate: float = 200.0, step: int = 10, sustain_s: float = 30.0,
    boot_s: float = 120.0, max_instances: int = 2_000,
) -> dict[str, SimReport]:  # fmt: skip
    """``n`` heavy-tailed tasks (:func:`scaling_trace`) arrive together on an empty
    fleet that autoscales as a cloud fleet would: at most ``step`` instances per
    ``sustain_s`` of sustained queue, each booting for ``boot_s``, up to
    ``max_instances``. It shows how end-to-end time grows with ``n``: no bound
    is built in, and the lower bound for each ``n`` is ``boot_s`` plus its
    longest task."""
    out: dict[str, SimReport] = {}
    for n in sizes:
        trace = scaling_trace(n, median_s=median_s, sigma=sigma, seed=seed)
        cfg = SchedulerConfig(
            max_concurrency=1_000_000,
            admission=AdmissionConfig(sandbox_rate=sandbox_rate, sandbox_burst=sandbox_rate),
            autoscale=AutoscaleConfig(
                enabled=True, queue_threshold=0, sustain_s=sustain_s, step=step, idle_s=600,
                max_instances=max_instances,
            ),
        )  # fmt: skip
        sim_fleet = SimulatedFleet(INSTANCE, boot_s=boot_s)
        sim = Simulator(cfg, [], trace, fleet=sim_fleet, options=SimOptions())
        out[f"{n:,} tasks"] = asyncio.run(sim.run())
    return out

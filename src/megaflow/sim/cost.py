"""What a fleet costs: instance types with prices and start times, packed against
one-task-per-instance fleets, spot instances with interruptions and a reserved baseline.

A :class:`CostScenario` is a batch of agent tasks arriving together, with
log-normal lengths and a mean CPU use per task. :func:`fleet_cost` places
them with the real dispatch core in the simulator on a fleet of one
:class:`InstanceType` (``tasks_per_instance`` slots each) and bills every
instance from its request (its start time included) until its last task
ends, per second with a one-minute minimum: an instance that holds many tasks
is paid until its slowest one finishes, so heavy-tailed lengths leave it
idle and paid for. Utilisation is the CPU the tasks use over the CPU paid
for. :func:`spot_cost` prices the one-task-per-instance fleet with a share of
reserved instances and the rest on spot, each spot attempt interrupted at a
Poisson rate and started again from scratch on a new instance.

Prices are assumptions, not quotes (nothing here is looked up): the defaults
are near the on-demand list prices of an 8-vCPU/16 GB compute instance and of
a 3 TB memory-optimised instance in a US region; pass your own.
"""

from __future__ import annotations

import asyncio
import math
import random
from dataclasses import dataclass, replace

from megaflow.core.tasks import Outcome
from megaflow.scheduler.abstract import InstanceSpec, TaskFeedback
from megaflow.scheduler.config import SchedulerConfig
from megaflow.sim.engine import SimOptions, Simulator
from megaflow.sim.trace import TraceTask

MIN_BILLED_S = 60.0


@dataclass(frozen=True)
class InstanceType:
    name: str
    cpu: int
    memory_gb: int
    price_h: float
    """On-demand price per hour (USD), an assumption."""
    start_s: float
    """From request to ready, billed."""
    tasks_per_instance: int


SMALL = InstanceType("8 vCPU / 16 GB", 8, 16, price_h=0.34, start_s=60.0, tasks_per_instance=1)
BIG = InstanceType("208 vCPU / 3 TB", 208, 3072, price_h=27.30, start_s=300.0,
                   tasks_per_instance=50)  # fmt: skip


@dataclass(frozen=True)
class CostScenario:
    tasks: int = 2000
    median_s: float = 3600.0
    sigma: float = 0.8
    """Spread of the log-normal task length (0.8: P99 about 6.4x the median)."""
    cpu_used: float = 2.0
    """Mean CPU cores a task keeps busy (agent, tools, tests; the model runs elsewhere)."""
    seed: int = 0

    def trace(self) -> list[TraceTask]:
        rng = random.Random(self.seed)
        return [
            TraceTask(arrival_s=0.0, duration_s=rng.lognormvariate(math.log(self.median_s),
                      self.sigma), cpu=1.0, memory_mb=1024)
            for _ in range(self.tasks)
        ]  # fmt: skip


@dataclass(frozen=True)
class CostReport:
    fleet: str
    instances: int
    cost_usd: float
    makespan_s: float
    utilisation: float
    """CPU-seconds the tasks used over CPU-seconds paid for."""
    interruptions: int = 0


def _billed(seconds: float) -> float:
    return max(MIN_BILLED_S, seconds)


def fleet_cost(
    scenario: CostScenario, itype: InstanceType, instances: int | None = None
) -> CostReport:
    """All tasks on ``instances`` instances of ``itype`` (enough for all at once by
    default), placed by the dispatch core; each billed until its last task ends."""
    trace = scenario.trace()
    n = instances or math.ceil(len(trace) / itype.tasks_per_instance)
    fleet = [
        InstanceSpec(f"{itype.name}-{k}", cpu=itype.cpu, memory_mb=itype.memory_gb * 1024,
                     slots=itype.tasks_per_instance)
        for k in range(n)
    ]  # fmt: skip
    last: dict[str, float] = {}

    def ended(fb: TaskFeedback) -> None:
        if fb.outcome is Outcome.OK:
            last[fb.instance] = max(last.get(fb.instance, 0.0), fb.ended_at)

    cfg = SchedulerConfig(max_concurrency=1_000_000)
    sim = Simulator(cfg, fleet, trace, options=SimOptions(sandbox_start_s=itype.start_s))
    sim.core.listeners.append(ended)
    report = asyncio.run(sim.run())
    paid_s = sum(_billed(t) for t in last.values())  # an unused instance is released at once
    used = scenario.cpu_used * sum(t.duration_s for t in trace)
    return CostReport(
        fleet=f"{n:,} x {itype.name}, {itype.tasks_per_instance} task(s) each",
        instances=n,
        cost_usd=paid_s / 3600 * itype.price_h,
        makespan_s=report.makespan_s,
        utilisation=used / (paid_s * itype.cpu) if paid_s else 0.0,
    )


def spot_cost(
    scenario: CostScenario,
    itype: InstanceType = SMALL,
    *,
    reserved_share: float = 0.2,
    reserved_discount: float = 0.4,
    spot_discount: float = 0.65,
    interruptions_per_h: float = 0.05,
) -> CostReport:
    """One task per instance: ``reserved_share`` of the tasks on reserved instances
    (``reserved_discount`` off, never interrupted), the rest on spot (``spot_discount``
    off); a spot attempt is interrupted at ``interruptions_per_h`` and its task starts
    over on a new spot instance, paying its start time again."""
    itype = replace(itype, tasks_per_instance=1)
    trace = scenario.trace()
    rng = random.Random(scenario.seed + 1)
    n_reserved = round(reserved_share * len(trace))
    cost = paid_cpu_s = 0.0
    makespan = 0.0
    interrupted = 0
    for i, task in enumerate(trace):
        need = itype.start_s + task.duration_s
        if i < n_reserved:
            cost += _billed(need) / 3600 * itype.price_h * (1 - reserved_discount)
            paid_cpu_s += _billed(need) * itype.cpu
            makespan = max(makespan, need)
            continue
        t = 0.0
        while True:
            cut = rng.expovariate(interruptions_per_h / 3600) if interruptions_per_h else math.inf
            held = min(cut, need)
            cost += _billed(held) / 3600 * itype.price_h * (1 - spot_discount)
            paid_cpu_s += _billed(held) * itype.cpu
            t += held
            if cut >= need:
                break
            interrupted += 1
        makespan = max(makespan, t)
    used = scenario.cpu_used * sum(t.duration_s for t in trace)
    return CostReport(
        fleet=f"{len(trace):,} x {itype.name}: {reserved_share:.0%} reserved, rest spot",
        instances=len(trace),
        cost_usd=cost,
        makespan_s=makespan,
        utilisation=used / paid_cpu_s if paid_cpu_s else 0.0,
        interruptions=interrupted,
    )


def paper_scenario(scenario: CostScenario | None = None) -> dict[str, CostReport]:
    """The MegaFlow paper's comparison at 2,000 tasks: few big packed instances against
    many small ones with one task each, and the small fleet on spot with a reserved base."""
    s = scenario or CostScenario()
    return {
        "centralised": fleet_cost(s, BIG),
        "distributed, on demand": fleet_cost(s, SMALL),
        "distributed, spot + reserved": spot_cost(s),
    }


ASSUMPTIONS = (
    "Assumptions (each changes the figure): {tasks:,} tasks arriving together; lengths "
    "log-normal, median {median_s:,.0f} s, sigma {sigma}; each task keeps {cpu_used} cores "
    f"busy on average; prices ${SMALL.price_h}/h ({SMALL.name}) and ${BIG.price_h}/h "
    f"({BIG.name}), on demand, assumed, not quoted; start times {SMALL.start_s:.0f} s and "
    f"{BIG.start_s:.0f} s, billed; per-second billing, {MIN_BILLED_S:.0f} s minimum; an "
    "instance is released when its last task ends. Spot: 65% off, 0.05 interruptions per "
    "instance-hour, an interrupted task starts over; reserved: 20% of tasks, 40% off."
)


def cost_rows(reports: dict[str, CostReport]) -> list[list[str]]:
    base = next(iter(reports.values())).cost_usd
    return [
        [name, r.fleet, f"${r.cost_usd:,.0f}", f"{r.cost_usd / base - 1:+.0%}",
         f"{r.makespan_s / 3600:,.1f} h", f"{r.utilisation:.1%}", f"{r.interruptions:,}"]
        for name, r in reports.items()
    ]  # fmt: skip


COST_COLUMNS = [
    "scenario",
    "fleet",
    "cost",
    "vs centralised",
    "makespan",
    "CPU util",
    "interrupted",
]

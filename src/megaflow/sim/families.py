"""Named families of generated workloads, for training and for evaluating policies.

A family fixes how tasks arrive, how long they run, what they ask for and the
fleet they run on; its ``episode(seed)`` draws one trace of it. Families are
split three ways, fixed before the policy of issue 31 was developed:

- :data:`TRAIN_FAMILIES`: the ``learned`` policy trains on them (seeds below
  :data:`TRAIN_SEEDS`);
- :data:`VALIDATION_FAMILIES`: used while developing (choosing settings,
  the wait bound, the tests), with seeds from :data:`VALIDATION_SEEDS`; the
  four older "unseen" families are here, since they were used while
  redesigning the policy;
- :data:`TEST_FAMILIES`: evaluated once, at the end, with seeds from
  :data:`TEST_SEEDS`, and reported whatever they show; nothing is tuned on them.

``two-class`` is the small family the tests train on. Loads are the arrival
rate over the fleet's CPU capacity (quiet arrivals only, where a family has
timed bursts); above 1 a queue builds up during the trace and drains after.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from megaflow.core.errors import InvalidInput
from megaflow.scheduler.abstract import InstanceSpec
from megaflow.scheduler.config import SchedulerConfig
from megaflow.sim.gym_env import Episode
from megaflow.sim.studies import INSTANCE, fleet
from megaflow.sim.trace import MAX_DURATION_S, PROFILES, TraceTask, TypeProfile

Arrivals = Callable[[random.Random, float, float], float]
"""(rng, now, mean rate) -> the next arrival time."""


def poisson(rng: random.Random, now: float, rate: float) -> float:
    return now + rng.expovariate(rate)


def diurnal(period_s: float = 6 * 3600.0, depth: float = 0.8) -> Arrivals:
    """A rate swinging between ``1 - depth`` and ``1 + depth`` times the mean (thinning)."""

    def nxt(rng: random.Random, now: float, rate: float) -> float:
        peak = rate * (1 + depth)
        while True:
            now += rng.expovariate(peak)
            if rng.random() * peak <= rate * (1 + depth * math.sin(2 * math.pi * now / period_s)):
                return now

    return nxt


@dataclass(frozen=True)
class Family:
    name: str
    profiles: dict[str, TypeProfile]
    mix: dict[str, float]
    instances: int = 20
    load: tuple[float, float] = (1.1, 1.1)
    """Load drawn uniformly in this range, per episode."""
    arrivals: Arrivals = poisson
    burst_prob: float = 0.01
    burst_size: int = 20
    burst_every_s: float = 0.0
    """Above 0: instead of random bursts, a burst of about ``burst_size`` tasks (0.5x to
    1.5x) every this many seconds (the first after one period), quiet arrivals between."""
    tenants: tuple[float, ...] = ()
    """Tenant weights; when given, a task's tenant is drawn by them and its run is its
    tenant's (run ``k`` of its type for tenant ``k``), so ``fair`` shares by tenant."""
    run_sigma: tuple[float, float] = (0.0, 0.0)
    """Spread of each run's median length around its type's, drawn uniformly in this
    range per episode: log-normal factors, scaled to mean 1 over the type's runs so the
    load stays. Runs of one type differ (another task set, agent or model), so a run's
    finished tasks predict its next ones; at 0 every run of a type is alike and nothing
    a scheduler sees tells a task's length beyond its type's mean."""
    tasks: int = 2000
    template: InstanceSpec = INSTANCE
    about: str = ""
    config: Callable[[], SchedulerConfig] = field(
        default=lambda: SchedulerConfig(max_concurrency=1_000_000)
    )

    def mean_cpu_s(self) -> float:
        total = sum(self.mix.values())
        return sum(
            share / total * self.profiles[k].cpu * self.profiles[k].mean_length()
            for k, share in self.mix.items()
        )

    def trace(self, seed: int, tasks: int | None = None) -> list[TraceTask]:
        rng = random.Random(seed)
        n = self.tasks if tasks is None else tasks
        load = rng.uniform(*self.load)
        rate = load * self.instances * self.template.cpu / self.mean_cpu_s()
        names, weights = list(self.mix), list(self.mix.values())
        scale = self._run_scales(seed)
        out: list[TraceTask] = []
        t = 0.0
        next_burst = self.burst_every_s
        while len(out) < n:
            t = self.arrivals(rng, t, rate)
            if self.burst_every_s > 0:
                k = 1
                if t >= next_burst:
                    t, next_burst = next_burst, next_burst + self.burst_every_s
                    k = round(self.burst_size * rng.uniform(0.5, 1.5))
            else:
                k = self.burst_size if rng.random() < self.burst_prob else 1
            for _ in range(min(k, n - len(out))):
                out.append(self._task(rng, t, names, weights, scale))
        return out

    def _task(
        self, rng: random.Random, t: float, names: list[str], weights: list[float],
        scale: dict[str, float],
    ) -> TraceTask:  # fmt: skip
        name = rng.choices(names, weights)[0]
        p = self.profiles[name]
        raw = p.draw_length(rng)
        prio = p.priority + rng.randint(0, 2)
        if self.tenants:
            k = rng.choices(range(len(self.tenants)), self.tenants)[0]
            run, tenant = f"{name}-{k}", f"tenant-{k}"
        else:
            run, tenant = f"{name}-{rng.randrange(p.runs)}", f"tenant-{rng.randrange(3)}"
        dur = min(MAX_DURATION_S, raw * scale.get(run, 1.0))
        return TraceTask(
            arrival_s=t, duration_s=max(1.0, dur), type=name, priority=prio, run=run,
            tenant=tenant, cpu=p.cpu, memory_mb=p.draw_memory(rng),
        )  # fmt: skip

    def _run_scales(self, seed: int) -> dict[str, float]:
        """Each run's length factor, drawn per trace from a stream of its own (so the
        arrivals, types and runs of a seed are the same whatever ``run_sigma`` is)."""
        rng = random.Random(f"{seed}/runs")
        sigma = rng.uniform(*self.run_sigma)
        if sigma <= 0:
            return {}
        out: dict[str, float] = {}
        for name in sorted(self.profiles):
            runs = self.profiles[name].runs
            f = [rng.lognormvariate(0.0, sigma) for _ in range(runs)]
            mean = sum(f) / runs  # runs are equally likely: the type's mean length is kept
            out.update({f"{name}-{r}": f[r] / mean for r in range(runs)})
        return out

    def expected_durations(self, seed: int, trace: list[TraceTask]) -> list[float]:
        """Each row's expected run time given what can be known before it runs: its
        type's log-normal mean times its run's length factor (``trace`` drawn from
        ``seed``; the cap at ``MAX_DURATION_S`` is left out). The best estimate any
        scheduler can have of a task, however well it learns its runs."""
        scale = self._run_scales(seed)
        mean = {k: p.mean_length() for k, p in self.profiles.items()}
        return [mean[t.type] * scale.get(t.run, 1.0) for t in trace]

    def episode(self, seed: int, tasks: int | None = None) -> Episode:
        return Episode(self.config(), fleet(self.instances, self.template), self.trace(seed, tasks))


MIX = {"train": 0.5, "eval": 0.3, "synth": 0.2}
_LONG_TAIL = {
    "train": TypeProfile(median_s=300.0, sigma=1.5, cpu=2.0, memory_mb=4096, priority=5),
    "eval": TypeProfile(median_s=600.0, sigma=1.3, cpu=1.0, memory_mb=2048, priority=3),
    "synth": TypeProfile(median_s=60.0, sigma=1.6, cpu=0.5, memory_mb=1024, priority=0),
}
_WIDE = {
    "train": TypeProfile(median_s=600.0, sigma=1.0, cpu=4.0, memory_mb=16384, priority=5),
    "eval": TypeProfile(median_s=300.0, sigma=0.8, cpu=1.0, memory_mb=2048, priority=3),
    "synth": TypeProfile(median_s=120.0, sigma=1.2, cpu=0.25, memory_mb=512, priority=0),
}
_TWO_CLASS = {
    "eval": TypeProfile(median_s=20.0, sigma=0.3, cpu=1.0, memory_mb=1024, priority=0),
    "train": TypeProfile(median_s=600.0, sigma=0.3, cpu=1.0, memory_mb=1024, priority=0),
}

_MEMORY_SKEW = {
    "train": TypeProfile(median_s=600.0, sigma=1.0, cpu=2.0, memory_mb=8192, priority=5,
                         memory_mb_max=14336),
    "eval": TypeProfile(median_s=300.0, sigma=0.8, cpu=1.0, memory_mb=2048, priority=3),
    "synth": TypeProfile(median_s=120.0, sigma=1.2, cpu=0.5, memory_mb=1024, priority=0),
}  # fmt: skip
_MEMORY_HEAVY = {
    "eval": TypeProfile(median_s=300.0, sigma=0.8, cpu=1.0, memory_mb=10240, priority=3,
                        memory_mb_max=16384),
    "train": TypeProfile(median_s=600.0, sigma=1.0, cpu=2.0, memory_mb=4096, priority=5),
    "synth": TypeProfile(median_s=120.0, sigma=1.2, cpu=0.5, memory_mb=1024, priority=0),
}  # fmt: skip
_PARETO = {k: dataclasses.replace(p, pareto_alpha=1.6) for k, p in PROFILES.items()}
_FIVE_RUNS = {k: dataclasses.replace(p, runs=5) for k, p in PROFILES.items()}

_VARIED = (0.0, 0.8)
"""Training: runs of a type anywhere from alike to far apart."""
_RUNS = (0.5, 0.5)
"""Evaluation: runs of a type about a factor 1.6 apart (one sigma)."""

FAMILIES = {
    f.name: f
    for f in (
        Family("mix-poisson", PROFILES, MIX, load=(0.9, 1.3), run_sigma=_VARIED,
               about="the default train/eval/synth mix, Poisson arrivals with rare bursts"),
        Family("mix-bursty", PROFILES, MIX, load=(0.9, 1.3), burst_prob=0.05,
               run_sigma=_VARIED, about="the default mix, one arrival in twenty a burst of 20"),
        Family("diurnal", PROFILES, MIX, instances=30, arrivals=diurnal(), run_sigma=_RUNS,
               about="the default mix; arrival rate swings 0.2x-1.8x over 6 h"),
        Family("long-tail", _LONG_TAIL, MIX, run_sigma=_RUNS,
               about="other lengths: sigma 1.3-1.6, eval the longest type, synth 60 s"),
        Family("wide-tasks", _WIDE, MIX, run_sigma=_RUNS,
               about="other shapes: 4-CPU/16 GB train tasks, 0.25-CPU synth"),
        Family("big-fleet", PROFILES, MIX, instances=200, tasks=10_000, run_sigma=_RUNS,
               about="the default mix on 200 instances, 10,000 tasks"),
        Family("bursts", PROFILES, MIX, load=(0.3, 0.5), burst_every_s=4 * 3600.0,
               burst_size=1000, tasks=3600, run_sigma=_RUNS,
               about="quiet stretches (load 0.3-0.5), then a burst of 500-1,500 tasks "
                     "every 4 h"),
        Family("memory-skew", _MEMORY_SKEW, {"train": 0.3, "eval": 0.4, "synth": 0.3},
               load=(0.8, 1.0), run_sigma=_RUNS,
               about="2-CPU train tasks of 8-14 GB beside 1 and 2 GB ones on 32 GB "
                     "instances"),
        Family("pareto", _PARETO, MIX, load=(0.9, 1.2), run_sigma=_RUNS,
               about="the default mix with Pareto lengths (tail index 1.6, same medians)"),
        Family("tenants", _FIVE_RUNS, MIX, load=(0.9, 1.2), tenants=(40, 20, 10, 2, 1),
               run_sigma=_RUNS, about="five tenants at 40:20:10:2:1, each its own run"),
        Family("bursts-rare", PROFILES, MIX, instances=40, load=(0.2, 0.4),
               burst_every_s=6 * 3600.0, burst_size=2000, tasks=5000, run_sigma=_RUNS,
               about="40 instances, quiet (load 0.2-0.4), a burst of 1,000-3,000 every 6 h"),
        Family("memory-heavy", _MEMORY_HEAVY, {"eval": 0.35, "train": 0.35, "synth": 0.3},
               load=(0.85, 1.05), run_sigma=_RUNS,
               about="1-CPU tasks of 10-16 GB beside 4 GB and 1 GB ones on 32 GB instances"),
        Family("two-class", _TWO_CLASS, {"eval": 0.5, "train": 0.5}, instances=2,
               load=(1.2, 1.2), burst_prob=0.0, tasks=300,
               about="20 s and 600 s tasks of one shape, overloaded: the tests' family"),
    )
}  # fmt: skip
TRAIN_FAMILIES = ("mix-poisson", "mix-bursty")
TRAIN_SEEDS = 10_000
"""Training draws trace seeds below this; evaluations use seeds from it up."""
VALIDATION_FAMILIES = ("diurnal", "long-tail", "wide-tasks", "big-fleet", "bursts", "memory-skew")
TEST_FAMILIES = ("pareto", "tenants", "bursts-rare", "memory-heavy")
VALIDATION_SEEDS = tuple(range(10_001, 10_011))
"""Ten traces of each family for development (the training families' held-out traces)."""
TEST_SEEDS = tuple(range(20_001, 20_011))
"""Ten traces of each test family, drawn once for the final evaluation."""


def family(name: str) -> Family:
    try:
        return FAMILIES[name]
    except KeyError:
        raise InvalidInput(
            f"unknown trace family {name!r}; use one of {sorted(FAMILIES)}"
        ) from None

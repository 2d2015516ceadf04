"""Workload traces for the simulator: a seeded generator and a file format.

A trace is a list of :class:`TraceTask` in arrival order. Files are JSON
Lines, one task per line with the fields of :class:`TraceTask` (only
``arrival_s`` and ``duration_s`` are required)::

    {"arrival_s": 0.0, "duration_s": 731.2, "type": "train", "cpu": 2}

The generator mixes train, eval and synth tasks with log-normal (heavy
tailed) durations, Poisson arrivals and bursts of simultaneous arrivals.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from megaflow.core.errors import InvalidInput


@dataclass(frozen=True, slots=True)
class TraceTask:
    arrival_s: float
    duration_s: float
    type: str = "eval"
    priority: int = 0
    run: str = "run-0"
    tenant: str = "default"
    cpu: float = 1.0
    memory_mb: int = 2048
    gpu: int = 0


@dataclass(frozen=True, slots=True)
class TypeProfile:
    """How tasks of one type look: duration median and spread, size, priority."""

    median_s: float
    sigma: float
    cpu: float
    memory_mb: int
    priority: int
    runs: int = 4
    pareto_alpha: float = 0.0
    """Above 0: Pareto lengths of this tail index with median ``median_s`` (``sigma``
    unused) instead of log-normal ones."""
    memory_mb_max: int = 0
    """Above ``memory_mb``: each task asks for a whole number of GB drawn uniformly
    from ``memory_mb`` to this."""

    def draw_length(self, rng: random.Random) -> float:
        if self.pareto_alpha > 0:
            a = self.pareto_alpha  # paretovariate's median is 2 ** (1 / a)
            return self.median_s / 2 ** (1 / a) * rng.paretovariate(a)
        return rng.lognormvariate(math.log(self.median_s), self.sigma)

    def mean_length(self) -> float:
        """The mean of :meth:`draw_length` (before the cap at ``MAX_DURATION_S``)."""
        if self.pareto_alpha > 0:
            a = self.pareto_alpha
            scale = self.median_s / 2 ** (1 / a)
            return scale * a / (a - 1) if a > 1 else math.inf
        return self.median_s * math.exp(self.sigma**2 / 2)

    def draw_memory(self, rng: random.Random) -> int:
        if self.memory_mb_max > self.memory_mb:
            return 1024 * rng.randint(self.memory_mb // 1024, self.memory_mb_max // 1024)
        return self.memory_mb


PROFILES: dict[str, TypeProfile] = {
    "train": TypeProfile(median_s=600.0, sigma=1.0, cpu=2.0, memory_mb=4096, priority=5),
    "eval": TypeProfile(median_s=300.0, sigma=0.8, cpu=1.0, memory_mb=2048, priority=3),
    "synth": TypeProfile(median_s=120.0, sigma=1.2, cpu=0.5, memory_mb=1024, priority=0),
}
DEFAULT_MIX = {"train": 0.5, "eval": 0.3, "synth": 0.2}
MAX_DURATION_S = 4 * 3600.0


def mean_cpu_seconds(mix: dict[str, float]) -> float:
    """Expected CPU-seconds of one task of the mix (log-normal mean, before clipping)."""
    total = sum(mix.values())
    out = 0.0
    for name, share in mix.items():
        p = PROFILES[name]
        out += share / total * p.cpu * p.median_s * math.exp(p.sigma**2 / 2)
    return out


def synthetic_trace(
    n: int,
    *,
    seed: int = 0,
    rate: float = 10.0,
    mix: dict[str, float] | None = None,
    burst_prob: float = 0.01,
    burst_size: int = 50,
) -> list[TraceTask]:
    """``n`` tasks arriving at ``rate`` per second on average, with bursts."""
    if n < 0 or rate <= 0:
        raise InvalidInput(f"a trace needs n >= 0 and rate > 0, got n={n}, rate={rate}")
    mix = dict(mix or DEFAULT_MIX)
    unknown = set(mix) - set(PROFILES)
    if unknown:
        raise InvalidInput(f"unknown task types {sorted(unknown)}; use {sorted(PROFILES)}")
    rng = random.Random(seed)
    names = list(mix)
    weights = [mix[k] for k in names]
    out: list[TraceTask] = []
    t = 0.0
    while len(out) < n:
        t += rng.expovariate(rate)
        k = burst_size if rng.random() < burst_prob else 1
        for _ in range(min(k, n - len(out))):
            name = rng.choices(names, weights)[0]
            p = PROFILES[name]
            dur = min(MAX_DURATION_S, rng.lognormvariate(math.log(p.median_s), p.sigma))
            out.append(
                TraceTask(
                    arrival_s=t,
                    duration_s=max(1.0, dur),
                    type=name,
                    priority=p.priority + rng.randint(0, 2),
                    run=f"{name}-{rng.randrange(p.runs)}",
                    tenant=f"tenant-{rng.randrange(3)}",
                    cpu=p.cpu,
                    memory_mb=p.memory_mb,
                )
            )
    return out


def save_trace(trace: list[TraceTask], path: str | Path) -> None:
    with Path(path).open("w") as f:
        for task in trace:
            f.write(json.dumps(asdict(task)) + "\n")


def load_trace(path: str | Path) -> list[TraceTask]:
    """Read a JSON Lines trace; tasks are sorted by arrival."""
    allowed = {f.name for f in fields(TraceTask)}
    out = []
    with Path(path).open() as f:
        for no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
                extra = set(raw) - allowed
                if extra:
                    raise ValueError(f"unknown fields {sorted(extra)}")
                out.append(TraceTask(**raw))
            except (ValueError, TypeError) as exc:
                raise InvalidInput(f"{path}:{no}: not a trace task: {exc}") from None
    out.sort(key=lambda t: t.arrival_s)
    return out

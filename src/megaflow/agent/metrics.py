"""Run metrics: success rate, reward mean and spread, pass@k, steps, tokens, durations.

pass@k uses the unbiased estimator of Chen et al. (2021): with ``n`` samples
of a task of which ``c`` succeeded, the chance that at least one of ``k``
samples drawn without replacement succeeds is ``1 - C(n-c, k) / C(n, k)``;
a run's pass@k is the mean over its tasks.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from megaflow.core.errors import InvalidInput


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one task with ``c`` successes in ``n`` samples."""
    if not 0 <= c <= n or k < 1:
        raise InvalidInput(f"pass@k needs 0 <= c <= n and k >= 1, got n={n} c={c} k={k}")
    if k > n:
        raise InvalidInput(f"pass@{k} needs at least {k} samples per task, got {n}")
    if n - c < k:
        return 1.0
    # Product form of 1 - C(n-c, k) / C(n, k): exact and free of huge integers.
    return 1.0 - math.prod((n - c - i) / (n - i) for i in range(k))


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


class SampleOutcome(BaseModel):
    """One finished sample (attempt) of a task, as the metrics see it."""

    model_config = ConfigDict(extra="forbid")

    task_id: str = Field(description="The task the sample belongs to (not the sample's own id).")
    success: bool = False
    reward: float = 0.0
    steps: int = 0
    tokens: int = 0
    duration_s: float = 0.0
    error_kind: str | None = None


class RunMetrics(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tasks: int = 0
    samples: int = 0
    errors: int = 0
    success_rate: float = 0.0
    reward_mean: float = 0.0
    reward_std: float = 0.0
    pass_at_k: dict[int, float] = Field(default_factory=dict)
    steps_mean: float = 0.0
    tokens_total: int = 0
    tokens_mean: float = 0.0
    duration_mean_s: float = 0.0
    duration_p50_s: float = 0.0
    duration_p99_s: float = 0.0

    def as_flat(self) -> dict[str, float]:
        """A flat name -> number mapping, e.g. for TaskResult.metrics or a table."""
        out = {k: float(v) for k, v in self.model_dump(exclude={"pass_at_k"}).items()}
        out.update({f"pass@{k}": v for k, v in self.pass_at_k.items()})
        return out


def summarize(outcomes: Iterable[SampleOutcome], ks: Sequence[int] = (1,)) -> RunMetrics:
    """Aggregate samples. pass@k is given for each k no larger than the
    fewest samples any task has."""
    samples = list(outcomes)
    if not samples:
        return RunMetrics()
    by_task: dict[str, list[SampleOutcome]] = defaultdict(list)
    for s in samples:
        by_task[s.task_id].append(s)
    fewest = min(len(v) for v in by_task.values())
    rewards = [s.reward for s in samples]
    durations = [s.duration_s for s in samples]
    passes = {
        k: statistics.fmean(
            pass_at_k(len(v), sum(s.success for s in v), k) for v in by_task.values()
        )
        for k in sorted(set(ks))
        if k <= fewest
    }
    return RunMetrics(
        tasks=len(by_task),
        samples=len(samples),
        errors=sum(1 for s in samples if s.error_kind),
        success_rate=sum(s.success for s in samples) / len(samples),
        reward_mean=statistics.fmean(rewards),
        reward_std=statistics.pstdev(rewards),
        pass_at_k=passes,
        steps_mean=statistics.fmean(s.steps for s in samples),
        tokens_total=sum(s.tokens for s in samples),
        tokens_mean=statistics.fmean(s.tokens for s in samples),
        duration_mean_s=statistics.fmean(durations),
        duration_p50_s=percentile(durations, 50),
        duration_p99_s=percentile(durations, 99),
    )

"""Prometheus metrics of a job's results, on a registry passed in.

What the scheduler and the sandboxes cannot see on their own: how the runs
are doing (success rate, reward), how long tasks take per run and task type
and how much that varies (the coefficient of variation, std / mean), and what
the model costs (request latency, tokens). Per-sandbox CPU and memory are the
runtime's (megaflow.monitoring.environment).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_TASK_BUCKETS = (0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
_MODEL_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120)


@dataclass
class _Moments:
    """Running count, mean and variance (Welford), for the coefficient of variation."""

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0
    successes: int = 0
    reward_sum: float = 0.0
    keys: set[str] = field(default_factory=set)

    def add(self, x: float) -> None:
        self.n += 1
        delta = x - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (x - self.mean)

    @property
    def cv(self) -> float:
        if self.n < 2 or self.mean <= 0:
            return 0.0
        return math.sqrt(self.m2 / self.n) / self.mean


class JobMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.task_seconds = Histogram(
            "task_execution_seconds", "Time of one task attempt, sandbox start to graded.",
            ["run", "type"], buckets=_TASK_BUCKETS, namespace="megaflow", registry=r,
        )  # fmt: skip
        self.task_cv = Gauge(
            "task_execution_cv_ratio",
            "Coefficient of variation (std / mean) of task execution time.",
            ["run", "type"], namespace="megaflow", registry=r,
        )  # fmt: skip
        self.finished = Counter(
            "run_tasks_finished_total", "Finished task attempts, by outcome.",
            ["run", "outcome"], namespace="megaflow", registry=r,
        )  # fmt: skip
        self.success = Gauge(
            "run_success_ratio",
            "Share of finished tasks the agent solved.",
            ["run"],
            namespace="megaflow",
            registry=r,
        )
        self.reward = Gauge(
            "run_reward_mean",
            "Mean reward of finished tasks.",
            ["run"],
            namespace="megaflow",
            registry=r,
        )
        self.model_seconds = Histogram(
            "model_request_seconds", "Latency of one model call.", ["run"],
            buckets=_MODEL_BUCKETS, namespace="megaflow", registry=r,
        )  # fmt: skip
        self.model_tokens = Counter(
            "model_tokens_total",
            "Tokens of model calls.",
            ["run", "kind"],
            namespace="megaflow",
            registry=r,
        )
        self._runs: dict[tuple[str, str], _Moments] = {}
        self._totals: dict[str, _Moments] = {}

    def task_done(
        self, run: str, task_type: str, seconds: float, success: bool, reward: float
    ) -> None:
        self.task_seconds.labels(run, task_type).observe(seconds)
        moments = self._runs.setdefault((run, task_type), _Moments())
        moments.add(seconds)
        self.task_cv.labels(run, task_type).set(moments.cv)
        total = self._totals.setdefault(run, _Moments())
        total.add(seconds)
        total.successes += int(success)
        total.reward_sum += reward
        self.finished.labels(run, "solved" if success else "unsolved").inc()
        self.success.labels(run).set(total.successes / total.n)
        self.reward.labels(run).set(total.reward_sum / total.n)

    def task_failed(self, run: str, error_kind: str) -> None:
        self.finished.labels(run, error_kind).inc()

    def model_call(self, run: str, seconds: float, prompt: int, completion: int) -> None:
        self.model_seconds.labels(run).observe(seconds)
        self.model_tokens.labels(run, "prompt").inc(prompt)
        self.model_tokens.labels(run, "completion").inc(completion)

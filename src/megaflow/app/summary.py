"""The figures a finished job reports, computed from what the stores hold.

Every sample is counted. A sample that ran to the end (SUCCEEDED) is in the
metrics with its reward, an agent's own failure with reward 0 and as an
error. An *ungraded* sample (its task ended FAILED, TIMED_OUT or CANCELLED:
no graded result) is left out of the reward and pass@k figures and counted on
its own; its task time is its attempts' real time, never a 0. A job whose
samples are not all graded, or all errored, or errored in a larger share
than ``expect.max_error_share``, fails its checks, so `megaflow run` exits 1
for it. An arm with nothing graded has no resolved share and no task times
(``None``), never a 0.0% that reads as a measured figure.

The words (resolved, errored, ungraded, masked, cancelled) and
:func:`outcome` live in :mod:`megaflow.core.outcomes`, shared with the
dashboard and every command.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from megaflow.agent.metrics import RunMetrics, SampleOutcome, percentile, summarize
from megaflow.app.assembly import task_type
from megaflow.config.loader import parse_config
from megaflow.config.models import RunConfig
from megaflow.core.errors import MegaFlowError
from megaflow.core.outcomes import outcome, outcome_order, ungraded
from megaflow.core.states import TaskState
from megaflow.core.tasks import Attempt, TaskRecord, TaskResult, TaskType, group_id
from megaflow.storage.abstract import MetadataStore


@dataclass
class ArmSummary:
    run_id: str
    arm: str
    counts: dict[TaskState, int]
    metrics: RunMetrics
    task_p50_s: float | None
    """None (as the other times) when no sample of the arm took any: shown as a dash."""
    task_p99_s: float | None
    start_p50_s: float | None
    start_p99_s: float | None
    grade_start_p50_s: float | None = None
    grade_start_p99_s: float | None = None
    ungraded: int = 0
    """Samples without a graded result (failed, timed out, cancelled)."""

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def graded(self) -> int:
        return self.metrics.samples

    @property
    def cancelled(self) -> int:
        return self.counts.get(TaskState.CANCELLED, 0)

    @property
    def resolved(self) -> float:
        """Share of samples resolved (unfinished and ungraded samples count as not);
        see :attr:`resolved_share` for what to show."""
        return self.metrics.success_rate * self.metrics.samples / self.total if self.total else 0.0

    @property
    def resolved_share(self) -> float | None:
        """:attr:`resolved`, or ``None`` while no sample of the arm is graded."""
        return self.resolved if self.graded else None


@dataclass
class JobSummary:
    arms: list[ArmSummary]
    wall_s: float
    checks: list[tuple[str, bool, str]] = field(default_factory=list)
    before: int = 0
    """Tasks already finished when this process took the job over (``--resume``)."""

    @property
    def finished(self) -> int:
        return sum(n for a in self.arms for s, n in a.counts.items() if s.terminal)

    @property
    def cancelled(self) -> int:
        return sum(a.cancelled for a in self.arms)

    @property
    def ran(self) -> int:
        """Tasks this process finished, cancelled ones not included (they did no work):
        a resume's throughput counts these alone."""
        return max(0, self.finished - self.before - self.cancelled)

    @property
    def throughput(self) -> float:
        return self.ran / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def ok(self) -> bool:
        complete = all(s.terminal for a in self.arms for s in a.counts)
        return complete and all(ok for _, ok, _ in self.checks)


_STAGES = ("sandbox_start_s", "prepare_s", "agent_s", "grade_s")


async def outcome_counts(store: MetadataStore, run_id: str) -> dict[str, int]:
    """Tasks of a run by :func:`outcome`, in :data:`OUTCOMES` order."""
    results = {r.task_id: r for r in await store.list_results(run_id)}
    counts: dict[str, int] = {}
    for rec in await store.list_tasks(run_id):
        key = outcome(rec.state, results.get(rec.id))
        counts[key] = counts.get(key, 0) + 1
    return {k: counts[k] for k in sorted(counts, key=outcome_order)}


async def outcome_counts_by_type(store: MetadataStore, run_id: str) -> dict[str, dict[str, int]]:
    """:func:`outcome_counts` for each task type of the run (train and held-out ``eval``
    apart), types in name order."""
    results = {r.task_id: r for r in await store.list_results(run_id)}
    by_type: dict[str, dict[str, int]] = {}
    for rec in await store.list_tasks(run_id):
        counts = by_type.setdefault(task_type(rec.spec)[0].value, {})
        key = outcome(rec.state, results.get(rec.id))
        counts[key] = counts.get(key, 0) + 1
    return {t: {k: c[k] for k in sorted(c, key=outcome_order)} for t, c in sorted(by_type.items())}


async def planned_samples(store: MetadataStore, run_id: str) -> dict[str, int]:
    """Samples a run plans by task type, where known before they are submitted: a train
    run submits its train samples step by step, and plans ``steps x prompts_per_step x
    samples`` of them (dynamic sampling's refills come on top). Empty for other runs."""
    try:
        cfg = parse_config((await store.get_run(run_id)).config, f"run {run_id}")
    except MegaFlowError:
        return {}
    if cfg.train is None:
        return {}
    return {TaskType.TRAIN.value: cfg.train.train_samples(cfg.samples)}


def _outcome(rec: TaskRecord, res: TaskResult | None, attempts: list[Attempt]) -> SampleOutcome:
    m = res.metrics if res else {}
    if any(k in m for k in _STAGES):
        duration = sum(m.get(k, 0.0) for k in _STAGES)
    else:  # no stage times (the attempt raised): the attempts' wall time
        duration = sum((a.ended_at or a.started_at) - a.started_at for a in attempts)
    return SampleOutcome(
        task_id=group_id(rec.spec),
        success=bool(res and res.success),
        reward=res.reward if res else 0.0,
        steps=int(m.get("steps", 0)),
        tokens=int(m.get("tokens", 0)),
        duration_s=duration,
        error_kind=(res.error_kind.value if res and res.error_kind else None)
        if rec.state is TaskState.SUCCEEDED
        else rec.state.value,
    )


def _p50_p99(xs: list[float]) -> tuple[float | None, float | None]:
    return (percentile(xs, 50), percentile(xs, 99)) if xs else (None, None)


async def summarize_arm(store: MetadataStore, run_id: str, arm: str, samples: int) -> ArmSummary:
    records = await store.list_tasks(run_id)
    results = {r.task_id: r for r in await store.list_results(run_id)}
    attempts = {
        rec.id: [] if rec.state is TaskState.SUCCEEDED else await store.list_attempts(rec.id)
        for rec in records
    }
    outcomes = [_outcome(rec, results.get(rec.id), attempts[rec.id]) for rec in records]
    graded = [
        o for o, rec in zip(outcomes, records, strict=True) if rec.state is TaskState.SUCCEEDED
    ]
    lost = sum(1 for rec in records if ungraded(rec.state))
    metrics = summarize(graded, sorted({1, samples}))
    metrics.errors += lost
    # a task time is a task that ran: graded, or an attempt started (a task cancelled
    # before it ever started took no time, and is no 0.00 s)
    times = [
        o.duration_s
        for o, rec in zip(outcomes, records, strict=True)
        if rec.state is TaskState.SUCCEEDED or (rec.state.terminal and attempts[rec.id])
    ]
    done = [results[rec.id].metrics for rec in records if rec.id in results]
    starts = [m["sandbox_start_s"] for m in done if "sandbox_start_s" in m]
    grade_starts = [m["grade_sandbox_start_s"] for m in done if "grade_sandbox_start_s" in m]
    task_p50, task_p99 = _p50_p99(times)
    start_p50, start_p99 = _p50_p99(starts)
    grade_p50, grade_p99 = _p50_p99(grade_starts)
    return ArmSummary(
        run_id=run_id,
        arm=arm,
        counts=await store.count_by_state(run_id),
        metrics=metrics,
        task_p50_s=task_p50,
        task_p99_s=task_p99,
        start_p50_s=start_p50,
        start_p99_s=start_p99,
        grade_start_p50_s=grade_p50,
        grade_start_p99_s=grade_p99,
        ungraded=lost,
    )


def checks(cfg: RunConfig, arms: list[ArmSummary]) -> list[tuple[str, bool, str]]:
    out: list[tuple[str, bool, str]] = []
    for a in arms:
        graded = a.total - a.ungraded
        out.append((f"{a.arm}: every sample graded", a.ungraded == 0, f"{graded}/{a.total}"))
        ok = a.total - a.metrics.errors
        out.append((f"{a.arm}: not every sample errored", ok > 0, f"{ok} without an error"))
        cap, share = cfg.expect.max_error_share, a.metrics.errors / a.total if a.total else 0.0
        if cap < 1:
            out.append((f"{a.arm}: errors <= {cap:.0%}", share <= cap + 1e-9, f"{share:.1%}"))
    main = next(a for a in arms if a.arm == "main")
    if cfg.expect.min_resolved is not None:
        want = cfg.expect.min_resolved
        out.append(
            (f"run resolves >= {want:.0%}", main.resolved >= want - 1e-9, f"{main.resolved:.1%}")
        )
    control = next((a for a in arms if a.arm == "control"), None)
    if cfg.expect.max_control_resolved is not None and control is not None:
        cap = cfg.expect.max_control_resolved
        out.append(
            (
                f"control resolves <= {cap:.0%}",
                control.resolved <= cap + 1e-9,
                f"{control.resolved:.1%}",
            )
        )
    return out

"""The figures a finished job reports, computed from what the stores hold.

Every sample is counted. A sample that ran to the end (SUCCEEDED) is in the
metrics with its reward, an agent's own failure with reward 0 and as an
error. A *masked* sample (its task ended FAILED, TIMED_OUT or CANCELLED: no
graded result) is left out of the reward and pass@k figures and counted on
its own; its task time is its attempts' real time, never a 0. A job whose
samples are not all graded, or all errored, or errored in a larger share
than ``expect.max_error_share``, fails its checks, so `megaflow run` exits 1
for it.

:func:`outcome` is how the command line names where a task stands:
*resolved* or *unresolved* once graded, the error kind when it errored.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from megaflow.agent.metrics import RunMetrics, SampleOutcome, percentile, summarize
from megaflow.config.models import RunConfig
from megaflow.core.states import TaskState
from megaflow.core.tasks import Attempt, ErrorKind, TaskRecord, TaskResult, group_id
from megaflow.storage.abstract import MetadataStore


@dataclass
class ArmSummary:
    run_id: str
    arm: str
    counts: dict[TaskState, int]
    metrics: RunMetrics
    task_p50_s: float
    task_p99_s: float
    start_p50_s: float
    start_p99_s: float
    grade_start_p50_s: float = 0.0
    grade_start_p99_s: float = 0.0
    masked: int = 0
    """Samples without a graded result (failed, timed out, cancelled)."""

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def resolved(self) -> float:
        """Share of samples resolved (unfinished and failed samples count as not)."""
        return self.metrics.success_rate * self.metrics.samples / self.total if self.total else 0.0


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
    def ran(self) -> int:
        """Tasks this process finished: a resume's throughput counts these alone."""
        return self.finished - self.before

    @property
    def throughput(self) -> float:
        return self.ran / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def ok(self) -> bool:
        complete = all(s.terminal for a in self.arms for s in a.counts)
        return complete and all(ok for _, ok, _ in self.checks)


_STAGES = ("sandbox_start_s", "prepare_s", "agent_s", "grade_s")
_ENDED_AS = {
    TaskState.FAILED: ErrorKind.INFRA,
    TaskState.TIMED_OUT: ErrorKind.TIMEOUT,
    TaskState.CANCELLED: ErrorKind.CANCELLED,
}
ERROR_LABELS = {
    ErrorKind.AGENT: "agent error",
    ErrorKind.INFRA: "infra error",
    ErrorKind.INFRA_LOST: "infra lost",
    ErrorKind.TIMEOUT: "timed out",
    ErrorKind.CANCELLED: "cancelled",
    ErrorKind.TAMPERED: "tampered",
}
OUTCOMES = (
    *(s.value for s in TaskState if not s.terminal),
    "resolved", "unresolved", *ERROR_LABELS.values(),
)  # fmt: skip
"""Every :func:`outcome`, in the order tables show them."""


def outcome(state: TaskState, result: TaskResult | None) -> str:
    """Where a task stands: its state while unfinished; ``resolved`` or ``unresolved``
    once it ran and was graded; its error kind (:data:`ERROR_LABELS`) when it errored,
    an agent's own failure included (graded with reward 0)."""
    if not state.terminal:
        return state.value
    kind = result.error_kind if result else None
    if state is TaskState.SUCCEEDED:
        if kind is not None and not (result and result.success):
            return ERROR_LABELS[kind]
        return "resolved" if result and result.success else "unresolved"
    return ERROR_LABELS[kind or _ENDED_AS[state]]


async def outcome_counts(store: MetadataStore, run_id: str) -> dict[str, int]:
    """Tasks of a run by :func:`outcome`, in :data:`OUTCOMES` order."""
    results = {r.task_id: r for r in await store.list_results(run_id)}
    counts: dict[str, int] = {}
    for rec in await store.list_tasks(run_id):
        key = outcome(rec.state, results.get(rec.id))
        counts[key] = counts.get(key, 0) + 1
    return {k: counts[k] for k in sorted(counts, key=_order)}


def _order(key: str) -> int:
    return OUTCOMES.index(key) if key in OUTCOMES else len(OUTCOMES)


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


async def summarize_arm(store: MetadataStore, run_id: str, arm: str, samples: int) -> ArmSummary:
    records = await store.list_tasks(run_id)
    results = {r.task_id: r for r in await store.list_results(run_id)}
    outcomes = [
        _outcome(
            rec,
            results.get(rec.id),
            [] if rec.state is TaskState.SUCCEEDED else await store.list_attempts(rec.id),
        )
        for rec in records
    ]
    graded = [
        o for o, rec in zip(outcomes, records, strict=True) if rec.state is TaskState.SUCCEEDED
    ]
    masked = sum(
        1 for rec in records if rec.state.terminal and rec.state is not TaskState.SUCCEEDED
    )
    metrics = summarize(graded, sorted({1, samples}))
    metrics.errors += masked
    finished = [o for o, rec in zip(outcomes, records, strict=True) if rec.state.terminal]
    times = [o.duration_s for o in finished]
    done = [results[rec.id].metrics for rec in records if rec.id in results]
    starts = [m.get("sandbox_start_s", 0.0) for m in done]
    grade_starts = [m["grade_sandbox_start_s"] for m in done if "grade_sandbox_start_s" in m]
    return ArmSummary(
        run_id=run_id,
        arm=arm,
        counts=await store.count_by_state(run_id),
        metrics=metrics,
        task_p50_s=percentile(times, 50) if times else 0.0,
        task_p99_s=percentile(times, 99) if times else 0.0,
        start_p50_s=percentile(starts, 50) if starts else 0.0,
        start_p99_s=percentile(starts, 99) if starts else 0.0,
        grade_start_p50_s=percentile(grade_starts, 50) if grade_starts else 0.0,
        grade_start_p99_s=percentile(grade_starts, 99) if grade_starts else 0.0,
        masked=masked,
    )


def checks(cfg: RunConfig, arms: list[ArmSummary]) -> list[tuple[str, bool, str]]:
    out: list[tuple[str, bool, str]] = []
    for a in arms:
        graded = a.total - a.masked
        out.append((f"{a.arm}: every sample graded", a.masked == 0, f"{graded}/{a.total}"))
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

"""The figures a finished job reports, computed from what the stores hold."""

from __future__ import annotations

from dataclasses import dataclass, field

from megaflow.agent.metrics import RunMetrics, SampleOutcome, percentile, summarize
from megaflow.app.assembly import parse_task
from megaflow.config.models import RunConfig
from megaflow.core.states import TaskState
from megaflow.core.tasks import TaskRecord, TaskResult
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

    @property
    def finished(self) -> int:
        return sum(n for a in self.arms for s, n in a.counts.items() if s.terminal)

    @property
    def throughput(self) -> float:
        return self.finished / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def ok(self) -> bool:
        complete = all(s.terminal for a in self.arms for s in a.counts)
        return complete and all(ok for _, ok, _ in self.checks)


def _outcome(rec: TaskRecord, res: TaskResult | None) -> SampleOutcome:
    m = res.metrics if res else {}
    return SampleOutcome(
        task_id=parse_task(rec.spec).group,
        success=bool(res and res.success),
        reward=res.reward if res else 0.0,
        steps=int(m.get("steps", 0)),
        tokens=int(m.get("tokens", 0)),
        duration_s=sum(
            m.get(k, 0.0) for k in ("sandbox_start_s", "prepare_s", "agent_s", "grade_s")
        ),
        error_kind=(res.error_kind.value if res and res.error_kind else None)
        if rec.state is TaskState.SUCCEEDED
        else rec.state.value,
    )


async def summarize_arm(store: MetadataStore, run_id: str, arm: str, samples: int) -> ArmSummary:
    records = await store.list_tasks(run_id)
    results = {r.task_id: r for r in await store.list_results(run_id)}
    outcomes = [_outcome(rec, results.get(rec.id)) for rec in records]
    ks = sorted({1, samples})
    metrics = summarize(outcomes, ks)
    finished = [o for o, rec in zip(outcomes, records, strict=True) if rec.id in results]
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
    )


def checks(cfg: RunConfig, arms: list[ArmSummary]) -> list[tuple[str, bool, str]]:
    out: list[tuple[str, bool, str]] = []
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

"""What grading apart from the agent costs: a fresh sandbox per task.

A run's task now uses two sandboxes: the agent's, and a fresh one in which
its patch is graded (``docs/tasks-format.md``, Grading). This benchmark runs
the bundled mini-SWE set with the replay model (gold patches) through the
real job (scheduler, warm pool, builtin agent, grading, storage) and reads
each task's stored timings: the agent's sandbox start and repository
preparation, the grading sandbox's, and the whole grading stage. The peer,
measured in the same run on the same runtime, is one cold sandbox start
(``Runtime.create``, nothing pooled): the target is that the grading
sandbox costs no more than one sandbox start per task.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from megaflow.app.job import Job
from megaflow.config import parse_config
from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.config import LocalRuntimeConfig
from megaflow.environment.local import LocalRuntime
from report import report

TASKS = Path(__file__).resolve().parents[1] / "tasks" / "mini-swe"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


async def cold_starts(root: Path, n: int) -> list[float]:
    rt = LocalRuntime(LocalRuntimeConfig(root=str(root)))
    out = []
    async with rt:
        for _ in range(n):
            t0 = time.perf_counter()
            sb = await rt.create(EnvironmentSpec())
            out.append(time.perf_counter() - t0)
            await sb.destroy()
    return out


async def job_metrics(
    root: Path, limit: int, concurrency: int
) -> tuple[list[dict[str, float]], float]:
    cfg = parse_config({
        "name": "bench-grading",
        "tasks": {"type": "swebench", "path": str(TASKS), "limit": limit},
        "model": {"type": "replay", "play": "gold"},
        "environment": {"runtime": {"type": "local", "root": str(root / "sb")}},
        "scheduler": {"max_concurrency": concurrency},
        "storage": {"metadata": {"type": "sqlite", "path": str(root / "m.db")},
                    "artifacts": {"type": "local", "root": str(root / "art")}},
    })  # fmt: skip
    t0 = time.perf_counter()
    async with Job(cfg) as job:
        await job.submit()
        await job.wait()
        results = await job.stores.metadata.list_results(job.run_id)
    wall = time.perf_counter() - t0
    assert all(r.success for r in results), [r.error for r in results if not r.success]
    return [r.metrics for r in results], wall


def row(name: str, values: list[float], target: str = "-") -> list[str]:
    if not values:  # a MegaFlow before grading moved to a fresh sandbox has no such figure
        return [name, "-", "-", target, "0"]
    ms = [v * 1000 for v in values]
    return [name, f"{pct(ms, 50):.1f} ms", f"{pct(ms, 99):.1f} ms", target, str(len(ms))]


def ab_figures(limit: int, conc: int) -> None:
    """One job, its figures as ``ab NAME VALUE`` lines for ``benchmarks/ab.py``,
    which runs this against another commit's source, A B B A...: what the
    grading stage costs per task, before and after a change to grading."""
    with tempfile.TemporaryDirectory(prefix="mf-bench-grading-") as tmp:
        # The same task set twice over the same stores: a second run reads what
        # the first one kept (a grading environment's calibration, since it has one).
        for name in ("first", "again"):
            metrics, wall = asyncio.run(job_metrics(Path(tmp), limit, conc))
            grade = [m["grade_s"] * 1000 for m in metrics]
            print(f"ab {name}_run_grading_stage_p50_ms {statistics.median(grade):.2f}")
            print(f"ab {name}_run_grading_stage_mean_ms {statistics.fmean(grade):.2f}")
            print(f"ab {name}_run_job_wall_s {wall:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--ab", action="store_true", help="print ab figures for benchmarks/ab.py")
    args = ap.parse_args()
    limit, conc, n_cold = (8, 2, 20) if args.quick else (34, 4, 60)
    if args.ab:
        ab_figures(limit, conc)
        return
    with tempfile.TemporaryDirectory(prefix="mf-bench-grading-") as tmp:
        root = Path(tmp)
        cold = asyncio.run(cold_starts(root / "cold", n_cold))
        metrics, wall = asyncio.run(job_metrics(root / "job", limit, conc))
        cold += asyncio.run(cold_starts(root / "cold2", n_cold))  # before and after the job
    get = lambda key: [m[key] for m in metrics if key in m]  # noqa: E731
    grade_start = get("grade_sandbox_start_s")
    added = [a + b for a, b in zip(grade_start, get("grade_prepare_s"), strict=True)]
    rows = [
        row("peer: cold sandbox start (Runtime.create)", cold),
        row("agent sandbox start (warm pool)", get("sandbox_start_s")),
        row("grading sandbox start (warm pool)", grade_start, "P50 <= cold start P50"),
        row("agent repository preparation", get("prepare_s")),
        row("grading repository preparation", get("grade_prepare_s")),
        row("added per task: grading sandbox start + preparation", added),
        row("grading stage (patch, fresh sandbox, tests)", get("grade_s")),
        row("agent (replay of the gold patch)", get("agent_s")),
    ]
    start = f"{statistics.median(grade_start) * 1000:.1f} ms" if grade_start else "-"
    notes = (
        f"{len(metrics)} tasks of tasks/mini-swe at concurrency {conc} in {wall:.1f} s; every "
        f"one resolved. The grading sandbox's start at P50 is {start} against "
        f"{statistics.median(cold) * 1000:.1f} ms for a cold start; preparing the repository "
        "again in it costs as much as the agent's preparation. Cold starts are measured "
        "before and after the job, one at a time."
    )
    report(
        "grading",
        "Grading in a fresh sandbox: what it adds per task",
        ["figure", "P50", "P99", "target", "n"],
        rows,
        notes,
    )


if __name__ == "__main__":
    main()

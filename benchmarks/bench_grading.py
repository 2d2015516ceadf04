"""What grading apart from the agent costs: a fresh sandbox per task.

A run's task uses two sandboxes: the agent's, and a fresh one in which its
patch is graded (``docs/tasks-format.md``, Grading). This benchmark runs the
bundled mini-SWE set with the replay model (gold patches) through the real
job (scheduler, pool, builtin agent, grading, storage) and reads each task's
stored timings. Like is set against like:

- **warm against warm**: with the warm pool (the default), the grading
  sandbox's start is a pool hand-out, compared with the agent's sandbox
  start in the same job, also a hand-out;
- **cold against cold**: a job with no warm pool (``warm_share: 0``), whose
  grading sandbox starts cold, compared with a cold ``Runtime.create`` on the
  same runtime, measured before and after the jobs;
- **a job's wall time with and without the fresh grading sandbox**: the same
  job, A/B, the order alternating after one untimed job of each
  (``ab.interleave_reps``): A grades in a fresh sandbox (what a run does), B
  grades in the agent's own sandbox, reset to the base commit (``git reset
  --hard`` and ``git clean``) after its patch is taken, which is what grading
  did before the fresh sandbox; B exists only here, to price the fresh one.

``--mode grade``: ``megaflow grade``'s throughput on the set's gold patches and,
as the ``swebench`` harness's own evaluation cannot run here, the per-instance
cost of MegaFlow's grading stage by stage (``grade_throughput.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ab import interleave_reps, order_text, ratios, spread
from megaflow.app.job import Job
from megaflow.config import parse_config
from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.config import LocalRuntimeConfig
from megaflow.environment.local import LocalRuntime
from report import add_rule_args, begin, report

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


@contextlib.contextmanager
def graded_in_agent_sandbox() -> Iterator[None]:
    """Side B of the A/B: the swebench grader grades in the agent's sandbox, reset to
    the base commit once its patch is taken, instead of in a fresh one."""
    from megaflow.datasets.candidate import extract_patch
    from megaflow.datasets.grading import failed_report, grade_prepared
    from megaflow.datasets.prepare import clean_command, run_checked
    from megaflow.grading.abstract import Taken
    from megaflow.grading.swebench import SwebenchAttempt

    real_take, real_grade = SwebenchAttempt.take, SwebenchAttempt.grade
    reports: dict[int, Any] = {}

    async def take(self: SwebenchAttempt, sandbox: Any, trajectory: Any) -> Taken:
        max_bytes = self.cfg.max_patch_kb * 1024
        candidate = await extract_patch(sandbox, self.instance.base_commit, max_bytes)
        taken = Taken(candidate.patch, "patch.diff", candidate.error)
        if taken.error is None:
            allowed = (await self._calibration).allowed if self._calibration else frozenset()
            reset = f"git reset -q --hard && {clean_command(self.instance)}"
            await run_checked(sandbox, reset, "resetting the agent's sandbox")
            t0 = time.perf_counter()
            reports[id(self)] = await grade_prepared(
                sandbox, self.instance, taken.data, self.strict, allowed,
                harness=self.cfg.parser == "swebench",
            )  # fmt: skip
            self.times["grade_in_agent_sandbox_s"] = time.perf_counter() - t0
        return taken

    async def grade(self: SwebenchAttempt, taken: Taken) -> Any:
        if taken.error is not None:
            return failed_report(self.instance, taken.error, taken.data, self.strict)
        return reports.pop(id(self))

    SwebenchAttempt.take, SwebenchAttempt.grade = take, grade  # type: ignore[method-assign]
    try:
        yield
    finally:
        SwebenchAttempt.take, SwebenchAttempt.grade = real_take, real_grade  # type: ignore[method-assign]


async def job_metrics(
    root: Path, limit: int, concurrency: int, warm_share: float = 0.2
) -> tuple[list[dict[str, float]], float]:
    cfg = parse_config({
        "name": "bench-grading",
        "tasks": {"type": "swebench", "path": str(TASKS), "limit": limit},
        "model": {"type": "replay", "play": "gold"},
        "environment": {"runtime": {"type": "local", "root": str(root / "sb")},
                        "pool": {"warm_share": warm_share}},
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


def row(name: str, values: list[float], versus: str = "-") -> list[str]:
    if not values:  # a MegaFlow before grading moved to a fresh sandbox has no such figure
        return [name, "-", "-", versus, "0"]
    ms = [v * 1000 for v in values]
    return [name, f"{pct(ms, 50):.1f} ms", f"{pct(ms, 99):.1f} ms", versus, str(len(ms))]


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


def with_without(root: Path, limit: int, conc: int, reps: int) -> dict[str, Any]:
    """Side A (fresh grading sandbox) and B (the agent's), alternating, one warm-up each;
    fresh stores per job, so no job reads what another kept."""
    runs = iter(range(10**6))

    def fresh(_rep: int) -> tuple[list[dict[str, float]], float]:
        return asyncio.run(job_metrics(root / f"a{next(runs)}", limit, conc))

    def in_agent(_rep: int) -> tuple[list[dict[str, float]], float]:
        with graded_in_agent_sandbox():
            return asyncio.run(job_metrics(root / f"b{next(runs)}", limit, conc))

    a, b = interleave_reps(reps, [fresh, in_agent], warmup=1)
    return {"a": a, "b": b}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--ab", action="store_true", help="print ab figures for benchmarks/ab.py")
    ap.add_argument("--reps", type=int, default=None, help="A/B job pairs (default 3).")
    ap.add_argument("--mode", choices=["all", "jobs", "grade"], default="all",
                    help="jobs: the grading stage in jobs; grade: megaflow grade's throughput "
                    "and per-instance cost; all (make bench): both tables")  # fmt: skip
    add_rule_args(ap)
    args = ap.parse_args()
    if args.mode in ("grade", "all") and not args.ab:
        from grade_throughput import grade_mode

        begin(args)
        grade_args = argparse.Namespace(**{**vars(args), "reps": args.reps or 3})
        with tempfile.TemporaryDirectory(prefix="mf-bench-grade-") as tmp:
            grade_mode(grade_args, Path(tmp), report)
        if args.mode == "grade":
            return
    limit, conc, n_cold = (8, 2, 20) if args.quick else (34, 4, 60)
    reps = args.reps or (2 if args.quick else 3)
    if args.ab:
        ab_figures(limit, conc)
        return
    begin(args)
    with tempfile.TemporaryDirectory(prefix="mf-bench-grading-") as tmp:
        root = Path(tmp)
        cold = asyncio.run(cold_starts(root / "cold", n_cold))
        cold_job, _ = asyncio.run(job_metrics(root / "cold-job", limit, conc, warm_share=0.0))
        ab = with_without(root, limit, conc, reps)
        cold += asyncio.run(cold_starts(root / "cold2", n_cold))  # before and after the jobs
    metrics = [m for got, _ in ab["a"] for m in got]
    in_agent = [m for got, _ in ab["b"] for m in got]

    def get(key: str, of: list[dict[str, float]] | None = None) -> list[float]:
        return [m[key] for m in (metrics if of is None else of) if key in m]

    grade_start = get("grade_sandbox_start_s")
    added = [a + b for a, b in zip(grade_start, get("grade_prepare_s"), strict=True)]
    agent_start = get("sandbox_start_s")
    cold_grade = get("grade_sandbox_start_s", cold_job)
    walls_a = [w for _, w in ab["a"]]
    walls_b = [w for _, w in ab["b"]]
    rows = [
        row("warm: agent sandbox start (pool hand-out)", agent_start),
        row("warm: grading sandbox start (pool hand-out)", grade_start,
            "against the agent's hand-out: "
            f"{pct(grade_start, 50) / pct(agent_start, 50):.2f}x at P50"
            if grade_start and agent_start else "-"),
        row("cold: peer, Runtime.create (nothing pooled)", cold),
        row("cold: grading sandbox start, job without a warm pool", cold_grade,
            f"against Runtime.create: {pct(cold_grade, 50) / pct(cold, 50):.2f}x at P50"
            if cold_grade else "-"),
        row("agent repository preparation", get("prepare_s")),
        row("grading repository preparation", get("grade_prepare_s")),
        row("added per task: grading sandbox start + preparation", added),
        row("grading stage, A: patch, fresh sandbox, tests", get("grade_s")),
        row("grading stage, B: patch, reset agent sandbox, tests", get("grade_s", in_agent)),
        row("agent (replay of the gold patch)", get("agent_s")),
        ["job wall time: A fresh grading sandbox, B the agent's",
         f"A {spread(walls_a, '{:.1f} s'.format)}", f"B {spread(walls_b, '{:.1f} s'.format)}",
         f"A / B pair by pair: {spread(ratios(walls_a, walls_b), '{:.2f}x'.format)}",
         str(len(walls_a))],
    ]  # fmt: skip
    notes = (
        f"{limit} tasks of tasks/mini-swe at concurrency {conc}; every one resolved in every "
        f"job. Warm rows: the {reps} A jobs (warm pool, warm_share 0.2); the cold grading row: "
        "one job with warm_share 0, where every sandbox starts cold; Runtime.create measured "
        f"one at a time, {n_cold} before and {n_cold} after the jobs. A/B: {reps} pair(s) of "
        f"jobs after one untimed job of each, the order alternating ({order_text(2)}), fresh "
        "stores per job; B grades in the agent's sandbox reset to the base commit, as grading "
        "did before the fresh sandbox (a benchmark-only variant: it lets what the agent left "
        "outside git's reach reach the grader). The job wall time ratio A / B is what the "
        "fresh grading sandbox costs a whole job."
    )
    report(
        "grading",
        "Grading in a fresh sandbox: what it adds per task and per job",
        ["figure", "P50", "P99", "compared with", "n"],
        rows,
        notes,
        args=args,
        reps=reps,
    )


if __name__ == "__main__":
    main()

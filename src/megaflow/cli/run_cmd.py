"""``megaflow run CONFIG``: the main job, with a live progress display and a summary."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import typer
from prometheus_client import start_http_server
from rich.progress import (
    BarColumn,
    Progress,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from megaflow.app.gc_tuning import tuned_gc
from megaflow.app.job import Job, stored_config
from megaflow.app.summary import JobSummary, checks, summarize_arm
from megaflow.cli.common import DEFAULT_DB, EXIT_BAD_INPUT, EXIT_FAILED, console, fail, with_store
from megaflow.cli.config_cmd import missing_task_paths
from megaflow.cli.ids import resolve_run
from megaflow.cli.preflight import model_problems
from megaflow.cli.run_lock import hold, lock_path
from megaflow.config import load_config
from megaflow.config.models import RunConfig
from megaflow.core.errors import AlreadyExists, ConfigError, InvalidInput, MegaFlowError
from megaflow.core.states import ACTIVE_STATES, TaskState
from megaflow.storage.abstract import MetadataStore

_REFRESH_S = 0.25


def _refresh(job: Job, progress: Progress, bar: TaskID, t0: float) -> None:
    """Set the bar from the scheduler's counts: the tasks this process took in (on a
    resume, those left unfinished), so its rate is theirs. A cancelled task is no work
    done: it stays out of the bar's completed part and of the rate, counted apart."""
    counts: dict[TaskState, int] = {}
    for rid in job.run_ids:
        for s, n in job.sched.counts(rid).items():
            counts[s] = counts.get(s, 0) + n
    cancelled = counts.get(TaskState.CANCELLED, 0)
    finished = sum(n for s, n in counts.items() if s.terminal) - cancelled
    running = sum(n for s, n in counts.items() if s in ACTIVE_STATES)
    queued = sum(n for s, n in counts.items() if not s.terminal and s not in ACTIVE_STATES)
    elapsed = time.monotonic() - t0
    progress.update(
        bar, total=sum(counts.values()) or None, completed=finished, running=running,
        queued=queued, rate=finished / elapsed if elapsed > 0 else 0.0,
        cancelled=f", {cancelled} cancelled" if cancelled else "",
    )  # fmt: skip


async def _watch(job: Job, progress: Progress, done: asyncio.Event) -> None:
    """Refresh the display from the scheduler's counts until the job is done, and once
    more after: the last tasks finish between two refreshes, so the bar ends at 100%."""
    bar = progress.add_task("tasks", total=None, running=0, queued=0, rate=0.0, cancelled="")
    t0 = time.monotonic()
    while not done.is_set():
        _refresh(job, progress, bar, t0)
        try:
            await asyncio.wait_for(done.wait(), _REFRESH_S)
        except TimeoutError:
            pass
    _refresh(job, progress, bar, t0)


async def _finished(job: Job) -> int:
    """Tasks of the job already done in the store (before a resume runs any): terminal,
    cancelled ones not included, since the summary leaves every cancelled task out of
    the tasks a process ran (they did no work) and must not leave them out twice."""
    total = 0
    for rid in job.run_ids:
        counts = await job.stores.metadata.count_by_state(rid)
        total += sum(n for s, n in counts.items() if s.terminal and s is not TaskState.CANCELLED)
    return total


async def _run(job: Job, resume: bool, metrics_port: int | None = None) -> JobSummary:
    progress = Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), TaskProgressColumn(),
        TextColumn("{task.completed}/{task.total} done"),
        TextColumn(
            "{task.fields[running]} running, {task.fields[queued]} queued{task.fields[cancelled]}"
        ),
        TextColumn("{task.fields[rate]:.1f} tasks/s"), TextColumn("ETA"), TimeRemainingColumn(),
        console=console,
    )  # fmt: skip
    server = None
    if metrics_port is not None:
        try:
            server, _ = start_http_server(metrics_port, addr="127.0.0.1", registry=job.registry)
        except OSError as exc:
            raise InvalidInput(f"cannot serve metrics on port {metrics_port}: {exc}") from None
        console.print(f"metrics on http://127.0.0.1:{metrics_port}/metrics")
    try:
        return await _drive(job, resume, progress)
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()


async def _drive(job: Job, resume: bool, progress: Progress) -> JobSummary:
    async with job:
        before = await _finished(job) if resume else 0
        if resume:
            await job.resume()
        else:
            await job.submit()
        console.print(f"run [bold]{job.run_id}[/]: " + ", ".join(job.run_ids))
        for warning in job.warnings:
            console.print(f"[bold yellow]warning:[/] {warning}", highlight=False)
        done = asyncio.Event()
        with progress:
            watcher = asyncio.create_task(_watch(job, progress, done))
            try:
                await job.wait()
            finally:
                done.set()
                await watcher
        arms = [
            await summarize_arm(
                job.stores.metadata, rid, "control" if rid != job.run_id else "main",
                job.cfg.samples,
            )
            for rid in job.run_ids
        ]  # fmt: skip
    summary = JobSummary(arms=arms, wall_s=time.monotonic() - job.started_at, before=before)
    summary.checks = checks(job.cfg, arms)
    return summary


def _times(p50: float | None, p99: float | None, scale: float, unit: str) -> str:
    """``P50 / P99 unit``, or a dash when the arm has no such time."""
    if p50 is None or p99 is None:
        return "-"
    digits = 2 if unit == "s" else 1
    return f"{p50 * scale:.{digits}f} / {p99 * scale:.{digits}f} {unit}"


def _share(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def _print(job: Job, s: JobSummary) -> None:
    """The summary table. Words as :mod:`megaflow.core.outcomes` defines them: an arm
    with nothing graded shows dashes, never a 0.0% or a 0.00 s it did not measure. Its
    tasks are every task of the arm (its samples / samples per task), graded or not."""
    table = Table(title=f"job {job.run_id}")
    table.add_column("figure", no_wrap=True)
    for a in s.arms:
        table.add_column(a.arm, justify="right", no_wrap=True)
    ks = sorted({k for a in s.arms for k in a.metrics.pass_at_k})
    rows: list[tuple[str, list[str]]] = [
        ("samples (tasks x samples)", [f"{a.total} ({-(-a.total // job.cfg.samples)} x "
                                       f"{job.cfg.samples})" for a in s.arms]),
        ("graded", [f"{a.graded}/{a.total}" for a in s.arms]),
        ("resolved share", [_share(a.resolved_share) for a in s.arms]),
        *((f"pass@{k}", [_share(a.metrics.pass_at_k.get(k)) if a.graded else "-"
                         for a in s.arms]) for k in ks),
        ("reward mean ± std", [f"{a.metrics.reward_mean:.2f} ± {a.metrics.reward_std:.2f}"
                               if a.graded else "-" for a in s.arms]),
        ("errored (of them ungraded)", [f"{a.metrics.errors} ({a.ungraded})" for a in s.arms]),
        ("cancelled", [str(a.cancelled) for a in s.arms]),
        ("task time P50 / P99", [_times(a.task_p50_s, a.task_p99_s, 1, "s") for a in s.arms]),
        ("sandbox start P50 / P99",
         [_times(a.start_p50_s, a.start_p99_s, 1000, "ms") for a in s.arms]),
        ("grading sandbox start P50 / P99",
         [_times(a.grade_start_p50_s, a.grade_start_p99_s, 1000, "ms") for a in s.arms]),
    ]  # fmt: skip
    for name, cells in rows:
        table.add_row(name, *cells)
    console.print(table)
    earlier = f" ({s.before} had finished before this resume)" if s.before else ""
    gone = f"; {s.cancelled} cancelled, not counted" if s.cancelled else ""
    rate = f"throughput {s.throughput:.2f} tasks/s" if s.ran else "no throughput"
    console.print(f"{s.ran} tasks in {s.wall_s:.1f} s: {rate}{earlier}{gone}")
    for name, ok, got in s.checks:
        mark = "[green]pass[/]" if ok else "[red]FAIL[/]"
        console.print(f"check {mark}: {name} (got {got})")
    meta, artifacts = job.cfg.storage.metadata, job.cfg.storage.artifacts
    after = (
        f"-> `megaflow results {job.run_id}`"
        if meta.kept()
        else "(not kept: gone with this process, so `megaflow results` cannot read them)"
    )
    console.print(
        f"results: {meta.type} metadata {meta.where()} {after}; "
        f"trajectories, patches and grade reports under "
        f"{artifacts.where(f'runs/{job.run_id}/')}"
    )


def _load_for_resume(given: str, db: str, config: Path | None) -> tuple[str, RunConfig]:
    """The run ``given`` names (a whole id or a unique prefix) and the config stored with
    it, from the store ``--config`` (or ``--db``) names."""

    async def go(store: MetadataStore) -> tuple[str, RunConfig]:
        run_id = await resolve_run(store, given)
        return run_id, await stored_config(store, run_id)

    return with_store(db, go, config, "")


def run(
    config: Path | None = typer.Argument(None, help="A run config (YAML)."),
    resume: str | None = typer.Option(
        None, "--resume", help="Finish an interrupted run (its id or a unique prefix)."
    ),
    db: str = typer.Option(DEFAULT_DB, "--db", help="Metadata database, for --resume."),
    store_config: Path | None = typer.Option(
        None,
        "--config",
        "-c",
        help="For --resume: a run or cluster config whose storage names the metadata store.",
    ),
    metrics_port: int | None = typer.Option(
        None, "--metrics-port", help="Serve Prometheus metrics on 127.0.0.1:PORT/metrics."
    ),
    check_models: bool = typer.Option(
        True,
        "--check-models/--no-check-models",
        help="Before starting, check that each openai model endpoint answers and its key is set.",
    ),
) -> None:
    """Run the job described by CONFIG in this process, on the embedded defaults."""
    if (config is None) == (resume is None):
        fail("give either a CONFIG file or --resume RUN_ID")
    try:
        if resume is not None:
            resume, cfg = _load_for_resume(resume, db, store_config)
            job = Job(cfg, run_id=resume.removesuffix("-control"))
        else:
            assert config is not None
            cfg = load_config(config)
            missing = missing_task_paths(cfg, config.resolve().parent)
            if missing:
                fail(f"{config}: " + "; ".join(f"{f}: {why}" for f, why in missing))
            job = Job(cfg, config_dir=config.resolve().parent)
            job.plan()
    except ConfigError as exc:
        fail(str(exc), EXIT_BAD_INPUT)
    except MegaFlowError as exc:
        fail(str(exc), EXIT_BAD_INPUT)
    problems = model_problems(cfg) if check_models else []
    if problems:
        fail("; ".join(problems) + " (or pass --no-check-models)", EXIT_BAD_INPUT)
    try:
        with hold(lock_path(cfg.storage.metadata, job.run_id)), tuned_gc():  # after plan()
            summary = asyncio.run(_run(job, resume is not None, metrics_port))
    except InvalidInput as exc:
        fail(str(exc), EXIT_BAD_INPUT)
    except KeyboardInterrupt:
        fail(f"interrupted; finish it with `megaflow run --resume {job.run_id}`", EXIT_FAILED)
    except AlreadyExists as exc:
        fail(str(exc), EXIT_BAD_INPUT)
    except MegaFlowError as exc:
        fail(f"{type(exc).__name__}: {exc}", EXIT_FAILED)
    _print(job, summary)
    if not summary.ok:
        raise typer.Exit(EXIT_FAILED)

"""``megaflow bench``: run the benchmarks in ``benchmarks/`` and gather their tables.

Every run writes into a fresh folder (``benchmarks/.out/<UTC time>/``, passed
to the benchmarks in ``MEGAFLOW_BENCH_RESULTS``); ``benchmarks/RESULTS.md``
and ``benchmarks/results/`` are then rewritten from that run alone, so no
table of an earlier run survives beside it. Each table carries the run's id
(``MEGAFLOW_BENCH_RUN``); one without it (written by hand, or by another run)
is left out of ``RESULTS.md`` and named there. A tree with uncommitted changes
is refused (exit 2) unless ``--allow-dirty``, which every table then marks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import typer

from megaflow.cli.common import console, fail

RESULTS_ENV = "MEGAFLOW_BENCH_RESULTS"
RUN_ENV = "MEGAFLOW_BENCH_RUN"
ALLOW_DIRTY_ENV = "MEGAFLOW_BENCH_ALLOW_DIRTY"
RUN_MARK = "<!-- megaflow bench run: {} -->"
"""The line benchmarks/report.py puts first in each table of a ``megaflow bench`` run."""


def _git(where: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(where), *args], capture_output=True, text=True, check=False
    )
    return done.stdout.strip() if done.returncode == 0 else ""


def _commit(where: Path) -> str:
    head = _git(where, "rev-parse", "HEAD")
    if not head:
        return "unknown (not a git checkout)"
    return head + ("+dirty" if _git(where, "status", "--porcelain", "--untracked-files=no") else "")


def _settle(cores: int, longest_s: float) -> str:
    """Wait until the 1-minute load is at most the core count (or ``longest_s`` passed),
    so one benchmark's own load is not counted against the next; say what happened."""
    t0 = time.monotonic()
    while os.getloadavg()[0] > cores and time.monotonic() - t0 < longest_s:
        time.sleep(5)
    load, waited = os.getloadavg()[0], time.monotonic() - t0
    verdict = "settled" if load <= cores else "still above the core count"
    return f"load {load:.1f} after {waited:.0f} s ({verdict})"


def _gather(
    bench_dir: Path, run_dir: Path, header: list[str], failed: list[str], run_id: str
) -> Path:
    """Write RESULTS.md from this run's tables in ``run_dir`` (those carrying its id)
    and make ``results/`` a copy of them."""
    mark = RUN_MARK.format(run_id)
    tables: list[Path] = []
    foreign: list[Path] = []
    for table in sorted(run_dir.glob("*.md")):
        (tables if table.read_text().startswith(mark) else foreign).append(table)
    results = bench_dir / "results"
    results.mkdir(exist_ok=True)
    for stale in results.glob("*.md"):
        stale.unlink()
    for table in tables:
        shutil.copy2(table, results / table.name)
    texts = [t.read_text() for t in tables]
    loud = [t.stem for t, text in zip(tables, texts, strict=True) if "**Not quotable**" in text]
    parts = ["# Benchmark results", "", *header, ""]
    if loud:
        parts += [f"Not quotable (other work during the run): "
                  f"{', '.join(loud)}.", ""]  # fmt: skip
    if failed:
        parts += [f"Failed, so without a table: {', '.join(failed)}.", ""]
    if foreign:
        parts += [f"Left out, not written by this run: {', '.join(t.name for t in foreign)}.", ""]
    parts += texts
    out = bench_dir / "RESULTS.md"
    out.write_text("\n".join(parts))
    return out


def bench(
    names: list[str] = typer.Argument(None, help="Benchmarks to run (e.g. store); all if none."),
    quick: bool = typer.Option(False, "--quick", help="Short runs, for a smoke test."),
    settle_s: float = typer.Option(
        300.0, help="Longest wait before each benchmark for the load to fall to the core count."
    ),
    bench_dir: Path = typer.Option(Path("benchmarks"), help="The benchmarks directory."),
    allow_dirty: bool = typer.Option(
        False, "--allow-dirty", help="Run on a tree with uncommitted changes; tables say so."
    ),
) -> None:
    """Run benchmarks (each prints a table) and write benchmarks/RESULTS.md from this run."""
    if not bench_dir.is_dir():
        fail(f"no benchmarks directory at {bench_dir}; run from a MegaFlow checkout")
    scripts = sorted(bench_dir.glob("bench_*.py"))
    if names:
        wanted = {f"bench_{n.removeprefix('bench_').removesuffix('.py')}.py" for n in names}
        unknown = wanted - {s.name for s in scripts}
        if unknown:
            fail(
                f"unknown benchmark(s): {', '.join(sorted(unknown))}; have: "
                f"{', '.join(s.stem.removeprefix('bench_') for s in scripts)}"
            )
        scripts = [s for s in scripts if s.name in wanted]
    load0, commit0 = os.getloadavg()[0], _commit(bench_dir)
    if commit0.endswith("+dirty") and not allow_dirty:
        fail(
            f"the checkout at {bench_dir} has uncommitted changes to tracked files, so the "
            "tables would name no commit; commit them, or pass --allow-dirty to mark every "
            "table dirty with its diff"
        )
    started = time.gmtime()
    run_id = time.strftime("%Y%m%dT%H%M%SZ", started)
    run_dir = bench_dir / ".out" / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, RESULTS_ENV: str(run_dir.resolve()), RUN_ENV: run_id}
    if allow_dirty:
        env[ALLOW_DIRTY_ENV] = "1"
    cores = os.cpu_count() or 1
    failed = []
    for script in scripts:
        console.rule(f"[bold]{script.stem}")
        console.print(f"[dim]before {script.stem}: {_settle(cores, settle_s)}[/]")
        t0 = time.monotonic()
        cmd = [sys.executable, str(script)] + (["--quick"] if quick else [])
        if subprocess.run(cmd, check=False, env=env).returncode != 0:
            failed.append(script.stem)
        console.print(f"[dim]{script.stem} took {time.monotonic() - t0:.0f} s[/]")
    commit1 = _commit(bench_dir)
    moved = "" if commit1 == commit0 else f" (at the end: {commit1}; see each table's own)"
    flags = " ".join(
        [*(names or []), *(["--quick"] if quick else []), f"--settle-s {settle_s:g}"]
        + (["--allow-dirty"] if allow_dirty else [])
    )
    header = [
        f"Written whole by `megaflow bench {flags}` (`make bench` runs it in "
        f"full) from one run started {time.strftime('%Y-%m-%d %H:%M UTC', started)}, at "
        f"commit {commit0}{moved}, run id {run_id}: "
        f"{', '.join(s.stem for s in scripts)}.",
        f"Load average (1 min) {load0:.1f} at the start of the run, {os.getloadavg()[0]:.1f} "
        f"at the end, on {cores} cores. Each table gives its own date, commit, load and the "
        "CPU other work took while it ran; a table during which other work took more than "
        "report.py allows is marked not quotable; each records its flags, seeds and "
        f"repetitions. Before each benchmark the run waited up to {settle_s:.0f} s for the "
        "load to fall to the core count. Peers are "
        "measured in the same run as what they are compared with; see benchmarks/README.md.",
    ]
    if allow_dirty and commit0.endswith("+dirty"):
        stat = _git(bench_dir, "diff", "HEAD", "--stat")
        header += ["", "**Dirty tree** (`--allow-dirty`); `git diff --stat` at the start:",
                   "", "```", stat, "```"]  # fmt: skip
    out = _gather(bench_dir, run_dir, header, failed, run_id)
    console.print(f"results gathered in {out} (this run's tables: {run_dir})")
    if failed:
        fail(f"benchmarks failed: {', '.join(failed)}", code=1)

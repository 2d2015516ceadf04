"""Shared by the benchmarks: print a rich table and write it as markdown.

Each benchmark writes ``<name>.md`` into the results folder: the one
``megaflow bench`` gives it (``MEGAFLOW_BENCH_RESULTS``, a fresh folder per
run), else ``benchmarks/results``. Every table says when it was measured, on
which machine, at which commit, and the load average (1 min) when the
benchmark started and when it wrote the table; a table whose load exceeded
the core count is marked not quotable.
"""

from __future__ import annotations

import os
import platform
import subprocess
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

RESULTS = Path(__file__).resolve().parent / "results"
RESULTS_ENV = "MEGAFLOW_BENCH_RESULTS"
LOAD_AT_START = os.getloadavg()[0]
"""The load average when the benchmark imported this module, i.e. as it started."""


def results_dir() -> Path:
    return Path(os.environ.get(RESULTS_ENV) or RESULTS)


def machine() -> str:
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    py = platform.python_version()
    return f"{platform.machine()}, {os.cpu_count()} cores, {mem_gib:.0f} GiB, Python {py}"


def commit() -> str:
    """``git rev-parse HEAD`` of the checkout, with ``+dirty`` when tracked files changed."""
    repo = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
        )
        return done.stdout.strip() if done.returncode == 0 else ""

    head = git("rev-parse", "HEAD")
    if not head:
        return "unknown (not a git checkout)"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return head + ("+dirty" if dirty else "")


def quotable(before: float, after: float) -> bool:
    return max(before, after) <= (os.cpu_count() or 1)


def provenance(load_before: float | None = None, self_loading: str = "") -> tuple[str, bool]:
    """(the "Measured ..." line, whether the figures are quotable). ``self_loading``
    names what the benchmark itself runs that raises the load (e.g. a thousand
    concurrent sandboxes); then the load at the start alone decides."""
    before = LOAD_AT_START if load_before is None else load_before
    after = os.getloadavg()[0]
    cores = os.cpu_count() or 1
    ok = quotable(before, before if self_loading else after)
    line = (
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {machine()}, "
        f"commit {commit()}. Load average (1 min) {before:.2f} at the start, {after:.2f} "
        f"at the end, on {cores} cores."
    )
    if self_loading:
        line += (
            f" The load at the end includes the benchmark's own {self_loading}, so the load "
            "at the start decides whether the table is quotable."
        )
    if not ok:
        line += (
            f" **Not quotable**: the load exceeded the {cores} cores, so other work on "
            "the machine shaped these figures."
        )
    return line, ok


def report(
    name: str,
    title: str,
    columns: list[str],
    rows: list[list[str]],
    notes: str = "",
    *,
    load_before: float | None = None,
    extra_md: str = "",
    self_loading: str = "",
) -> None:
    """Print the table and write ``<name>.md``; ``extra_md`` goes to the file only."""
    line, ok = provenance(load_before, self_loading)
    shown = title if ok else f"{title} (not quotable)"
    table = Table(title=shown)
    for col in columns:
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    console = Console()
    console.print(table)
    if notes:
        console.print(notes)
    console.print(f"[dim]{line}[/]")
    lines = [
        f"## {shown}",
        "",
        line,
        "",
        "| " + " | ".join(columns) + " |",
        "|" + "---|" * len(columns),
        *("| " + " | ".join(row) + " |" for row in rows),
        "",
    ]
    if notes:
        lines += [notes, ""]
    if extra_md:
        lines += [extra_md, ""]
    out = results_dir()
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.md").write_text("\n".join(lines))

"""``megaflow top``: a live terminal view of runs, the queue, rates and errors.

Reads the metadata store (``--db`` or ``--config``), so it works beside a
running job or after it. Runs are named by their shortest unique prefix
(:mod:`megaflow.cli.ids`), which every command takes, so a row never wraps.
Finished tasks are *resolved* or *unresolved* (graded) or errors, counted by
kind in the footer. Rates are the change in finished tasks between two refreshes. When stdout
is not a terminal (a pipe, a file, a CI log) it prints one plain frame and
exits, as ``--once`` does.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import typer
from rich import box
from rich.console import Group
from rich.live import Live
from rich.table import Table

from megaflow.app.summary import outcome_counts
from megaflow.cli.common import DEFAULT_DB, ConfigOption, console, with_store
from megaflow.cli.ids import short_ids
from megaflow.core.outcomes import ERROR_LABELS
from megaflow.core.states import ACTIVE_STATES, TaskState
from megaflow.storage.abstract import MetadataStore

_WAITING = (TaskState.QUEUED, TaskState.RETRYING, TaskState.PREEMPTED)
_UNFINISHED = {s.value for s in TaskState if not s.terminal}
_COLUMNS = ("queued", "running", "resolved", "unresolved", "errors", "done", "/s")
_NARROW = ("queued", "running", "res/unres/err", "done", "/s")
_WIDE = 110
"""Below this many columns the three outcome counts share a column, without borders."""


class TopView:
    """Builds one frame from the store; remembers the last one for rates."""

    def __init__(self, store: MetadataStore, runs: int, width: int | None = None) -> None:
        self.store = store
        self.runs = runs
        self.width = width
        """The terminal's width; None reads it at each frame (it may be resized)."""
        self._last: tuple[float, dict[str, int]] | None = None

    async def frame(self) -> Group:
        every = await self.store.list_runs()
        runs = every[-self.runs :]
        short = short_ids([r.id for r in runs], [r.id for r in every])
        now = time.monotonic()
        counts = {r.id: await outcome_counts(self.store, r.id) for r in runs}
        done = {
            rid: sum(n for k, n in c.items() if k not in _UNFINISHED) for rid, c in counts.items()
        }
        rates: dict[str, float] = {}
        if self._last is not None:
            t0, before = self._last
            rates = {rid: (n - before.get(rid, n)) / max(now - t0, 1e-9) for rid, n in done.items()}
        self._last = (now, done)
        narrow = (self.width or console.width) < _WIDE
        table = Table(
            title="megaflow top", expand=not narrow, box=box.SIMPLE if narrow else box.HEAVY_HEAD
        )
        table.add_column("run", no_wrap=True)  # a unique prefix, as `status` prints it
        cols = _NARROW if narrow else _COLUMNS
        for col in cols:
            table.add_column(col, justify="right", no_wrap=True, min_width=len(col))
        errors: dict[str, int] = {}
        totals: dict[str, float] = {"queued": 0, "running": 0, "rate": 0.0}
        for r in runs:
            c = counts[r.id]
            queued = sum(c.get(s.value, 0) for s in _WAITING)
            running = sum(c.get(s.value, 0) for s in ACTIVE_STATES)
            for label in ERROR_LABELS.values():
                errors[label] = errors.get(label, 0) + c.get(label, 0)
            rate = rates.get(r.id)
            totals["queued"] += queued
            totals["running"] += running
            totals["rate"] += rate or 0.0
            graded = [
                str(c.get("resolved", 0)), str(c.get("unresolved", 0)),
                str(sum(c.get(k, 0) for k in ERROR_LABELS.values())),
            ]  # fmt: skip
            table.add_row(
                short[r.id], str(queued), str(running),
                *(["/".join(graded)] if narrow else graded),
                f"{done[r.id]}/{sum(c.values())}", "-" if rate is None else f"{rate:.1f}",
            )  # fmt: skip
        by_kind = ", ".join(f"{k} {n}" for k, n in errors.items() if n)
        footer = (
            f"queue {totals['queued']:.0f} | in flight (sandboxes held) {totals['running']:.0f}"
            f" | errors {sum(errors.values())}{f' ({by_kind})' if by_kind else ''}"
            f" | {totals['rate']:.1f} tasks/s"
        )
        return Group(table, footer)


def top(
    db: str = typer.Option(DEFAULT_DB, "--db", help="Metadata database (SQLite file)."),
    config: Path | None = ConfigOption,
    interval: float = typer.Option(1.0, "--interval", min=0.1, help="Seconds between refreshes."),
    runs: int = typer.Option(10, "--runs", min=1, help="Show the newest N runs."),
    once: bool = typer.Option(False, "--once", help="Print one frame and exit."),
) -> None:
    """A live view of runs, the queue, rates and errors (Ctrl-C to quit)."""

    async def go(store: MetadataStore) -> None:
        view = TopView(store, runs)
        if once or not console.is_terminal:  # a pipe or a file gets one plain frame
            console.print(await view.frame())
            return
        with Live(await view.frame(), console=console, refresh_per_second=4) as live:
            while True:
                await asyncio.sleep(interval)
                live.update(await view.frame())

    try:
        with_store(db, go, config)
    except KeyboardInterrupt:
        pass

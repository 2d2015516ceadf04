"""``megaflow top``: a live terminal view of runs, the queue, rates and errors.

Reads the metadata store (``--db`` or ``--config``), so it works beside a
running job or after it. Runs are named by their shortest unique prefix
(:mod:`megaflow.cli.ids`), which every command takes, so a row never wraps.
Finished tasks are *resolved* or *unresolved* (graded) or errors, counted by
kind in the footer. *Done* and the rates (the change in done tasks between
two refreshes) leave cancelled tasks out, as :mod:`megaflow.core.outcomes`
defines the words. When stdout
is not a terminal (a pipe, a file, a CI log) it prints one plain frame and
exits, as ``--once`` does.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import typer
from rich import box
from rich.console import Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from megaflow.app.summary import outcome_counts_by_type, planned_samples
from megaflow.cli.common import DEFAULT_DB, ConfigOption, console, metadata_config, with_store
from megaflow.cli.ids import short_ids
from megaflow.cli.stacked import Block, columns, table_width
from megaflow.cli.status_cmd import driver_state
from megaflow.core.outcomes import ERROR_LABELS, is_done
from megaflow.core.states import ACTIVE_STATES, TaskState
from megaflow.storage.abstract import MetadataStore
from megaflow.storage.config import MetadataConfig

_OPEN = [s for s in TaskState if not s.terminal]
_WAITING = (TaskState.QUEUED, TaskState.RETRYING, TaskState.PREEMPTED)
_COLUMNS = ("queued", "running", "resolved", "unresolved", "errors", "done", "/s")
_NARROW = ("queued", "running", "res/unres/err", "done", "/s")
_WIDE = 110
_GONE = "[bold red]gone[/]"
"""Below this many columns the three outcome counts share a column, without borders."""


class TopView:
    """Builds one frame from the store; remembers the last one for rates."""

    def __init__(
        self,
        store: MetadataStore,
        runs: int,
        width: int | None = None,
        meta: MetadataConfig | None = None,
    ) -> None:
        self.store = store
        self.runs = runs
        self.meta = meta
        """The store's config, to tell from the run locks whether a run's driver lives."""
        self.width = width
        """The terminal's width; None reads it at each frame (it may be resized)."""
        self._last: tuple[float, dict[tuple[str, str], int]] | None = None
        self._planned: dict[str, dict[str, int]] = {}

    async def _rows(self, run_id: str) -> list[tuple[str, dict[str, int], int]]:
        """(type or "", counts by outcome, total) per row of a run: one row, or one per
        task type when it has several (a train run's train and held-out eval samples),
        the train row's total the samples the run plans, so it does not grow by step."""
        by_type = await outcome_counts_by_type(self.store, run_id)
        if run_id not in self._planned:
            self._planned[run_id] = await planned_samples(self.store, run_id)
        planned = self._planned[run_id]
        several = len(by_type) > 1 or bool(planned)
        return [
            (kind if several else "", c, max(sum(c.values()), planned.get(kind, 0)))
            for kind, c in (by_type.items() or [("", {})])
        ]

    async def _drivers(self, rows: list[tuple[str, str, dict[str, int], int]]) -> dict[str, str]:
        """Each run's driver while it has tasks unfinished: ``alive``, ``gone`` (it died:
        nothing moves its tasks), or empty when nothing tells (see ``megaflow status``)."""
        if self.meta is None:
            return {}
        unfinished: dict[str, int] = {}
        for rid, _, c, _ in rows:
            unfinished[rid] = unfinished.get(rid, 0) + sum(c.get(s.value, 0) for s in _OPEN)
        meta = self.meta
        return {r: await driver_state(self.store, meta, r, n) for r, n in unfinished.items()}

    async def frame(self) -> Group:
        every = await self.store.list_runs()
        runs = every[-self.runs :]
        short = short_ids([r.id for r in runs], [r.id for r in every])
        now = time.monotonic()
        rows = [(r.id, *row) for r in runs for row in await self._rows(r.id)]
        done = {(rid, kind): sum(n for k, n in c.items() if is_done(k)) for rid, kind, c, _ in rows}
        rates: dict[tuple[str, str], float] = {}
        if self._last is not None:
            t0, before = self._last
            rates = {key: (n - before.get(key, n)) / max(now - t0, 1e-9) for key, n in done.items()}
        self._last = (now, done)
        errors: dict[str, int] = {}
        totals: dict[str, float] = {"queued": 0, "running": 0, "rate": 0.0, "stalled": 0}
        cells: list[tuple[str, str, list[str], list[str]]] = []
        drivers = await self._drivers(rows)
        for rid, kind, c, total in rows:
            queued = sum(c.get(s.value, 0) for s in _WAITING)
            running = sum(c.get(s.value, 0) for s in ACTIVE_STATES)
            for label in ERROR_LABELS.values():
                errors[label] = errors.get(label, 0) + c.get(label, 0)
            rate = rates.get((rid, kind))
            if drivers.get(rid) == "gone":  # nothing moves them: neither queued nor in flight
                totals["stalled"] += sum(c.get(s.value, 0) for s in _OPEN)
            else:
                totals["queued"] += queued
                totals["running"] += running
            totals["rate"] += rate or 0.0
            graded = [
                str(c.get("resolved", 0)), str(c.get("unresolved", 0)),
                str(sum(c.get(k, 0) for k in ERROR_LABELS.values())),
            ]  # fmt: skip
            tail = [f"{done[(rid, kind)]}/{total}", "-" if rate is None else f"{rate:.1f}"]
            cells.append((rid, kind, [str(queued), str(running)], [*graded, *tail]))
        body = self._layout(cells, short, drivers)
        gone = ", ".join(short[r] for r, state in drivers.items() if state == "gone")
        by_kind = ", ".join(f"{k} {n}" for k, n in errors.items() if n)
        stalled = f"{totals['stalled']:.0f} tasks stalled until megaflow run --resume"
        footer = (
            f"queue {totals['queued']:.0f} | in flight (sandboxes held) {totals['running']:.0f}"
            f" | errors {sum(errors.values())}{f' ({by_kind})' if by_kind else ''}"
            f" | {totals['rate']:.1f} tasks/s"
            + (f" | driver gone: {gone} ({stalled})" if gone else "")
        )
        return Group(*body, footer)

    def _layout(
        self,
        cells: list[tuple[str, str, list[str], list[str]]],
        short: dict[str, str],
        drivers: dict[str, str],
    ) -> list[RenderableType]:
        """The frame's table: a column per count while that fits the width, else the
        three outcome counts in one column without borders, else a block per run (its
        id on a line of its own, its rows beneath: :mod:`megaflow.cli.stacked`). A
        ``driver`` column while any run's driver is known, as in ``megaflow status``."""
        width = self.width or console.width
        kinds = any(kind for _, kind, _, _ in cells)
        known = any(drivers.values())
        for narrow in (False, True) if width >= _WIDE else (True,):
            table = Table(
                title="megaflow top",
                expand=not narrow,
                box=box.SIMPLE if narrow else box.HEAVY_HEAD,
            )
            table.add_column("run", no_wrap=True)  # a unique prefix, as `status` prints it
            if kinds:
                table.add_column("type", no_wrap=True)
            for col in _NARROW if narrow else _COLUMNS:
                table.add_column(col, justify="right", no_wrap=True, min_width=len(col))
            if known:
                table.add_column("driver", no_wrap=True)
            for rid, kind, waiting, rest in cells:
                counts = [*waiting, "/".join(rest[:3]), *rest[3:]] if narrow else [*waiting, *rest]
                state = drivers.get(rid, "")
                driver = [_GONE if state == "gone" else state] if known else []
                table.add_row(short[rid], *([kind] if kinds else []), *counts, *driver)
            if table_width(table) <= width:
                return [table]
        blocks: dict[str, Block] = {}
        for rid, kind, waiting, rest in cells:
            note = f"driver {drivers[rid]}" if drivers.get(rid) else ""
            block = blocks.setdefault(rid, Block(short[rid], note))
            block.rows.append([kind, *waiting, "/".join(rest[:3]), *rest[3:]])
        header = ["type" if kinds else "", *_NARROW]
        lines = columns(header, list(blocks.values()), width)
        return [Text("megaflow top", style="italic"), *lines]


def top(
    db: str = typer.Option(DEFAULT_DB, "--db", help="Metadata database (SQLite file)."),
    config: Path | None = ConfigOption,
    interval: float = typer.Option(1.0, "--interval", min=0.1, help="Seconds between refreshes."),
    runs: int = typer.Option(10, "--runs", min=1, help="Show the newest N runs."),
    once: bool = typer.Option(False, "--once", help="Print one frame and exit."),
) -> None:
    """A live view of runs, the queue, rates and errors (Ctrl-C to quit)."""

    meta = metadata_config(db, config)

    async def go(store: MetadataStore) -> None:
        view = TopView(store, runs, meta=meta)
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

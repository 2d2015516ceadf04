"""``megaflow status [RUN]``: tasks by outcome, one row per run (per type in a run
that has several, so a train run's held-out ``eval`` samples stay apart from its
``train`` samples, whose total says how many the run plans while its steps
are still being submitted: "32 of 64"), run ids shortened to a unique prefix.
When the table does not fit the terminal whole, each run gets a line of its
own with its counts beneath it (:mod:`megaflow.cli.stacked`), so no id wraps
and no count is squeezed away.

An embedded run whose driving process died (its run lock is free,
:mod:`megaflow.cli.run_lock`) while tasks were unfinished is marked *driver
gone*: those tasks stay "starting" or "grading" in the store until `megaflow
run --resume` takes them up, and nothing else will move them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import typer
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from megaflow.app.summary import outcome_counts_by_type, planned_samples
from megaflow.cli.common import ConfigOption, DbOption, console, metadata_config, with_store
from megaflow.cli.ids import resolve_run, short_ids
from megaflow.cli.run_lock import Liveness, driver_liveness
from megaflow.cli.stacked import Block, sentences, table_width
from megaflow.cli.tables import outcome_columns
from megaflow.core.states import TaskState
from megaflow.storage.abstract import MetadataStore
from megaflow.storage.config import MetadataConfig

_UNFINISHED = {s.value for s in TaskState if not s.terminal}
TITLE = "runs: tasks by outcome"


@dataclass
class RunRow:
    run_id: str
    kind: str
    """The task type of the row; empty when the run has one type."""
    counts: dict[str, int]
    driver: str = ""
    planned: int = 0
    """Samples of this type the run plans (a train run's train samples), 0 if unknown."""


async def driver_state(
    store: MetadataStore, meta: MetadataConfig, run_id: str, unfinished: int
) -> str:
    """``gone`` when the run's driver died with tasks unfinished, ``alive`` when it runs,
    empty when nothing is unfinished or nothing tells (:func:`driver_liveness`)."""
    if not unfinished:
        return ""
    live = await driver_liveness(store, meta, run_id)
    return {Liveness.ALIVE: "alive", Liveness.GONE: "gone"}.get(live, "")


async def status_rows(
    store: MetadataStore, meta: MetadataConfig, run_id: str | None
) -> list[RunRow]:
    if run_id:
        runs = [await store.get_run(await resolve_run(store, run_id))]
    else:
        runs = await store.list_runs()
    rows: list[RunRow] = []
    for r in runs:
        by_type = await outcome_counts_by_type(store, r.id)
        planned = await planned_samples(store, r.id)
        unfinished = sum(n for c in by_type.values() for k, n in c.items() if k in _UNFINISHED)
        driver = await driver_state(store, meta, r.id, unfinished)
        several = len(by_type) > 1 or bool(planned)
        for kind, counts in by_type.items() or [("", {})]:
            rows.append(RunRow(r.id, kind if several else "", counts, driver, planned.get(kind, 0)))
    return rows


def _total(r: RunRow) -> str:
    n = sum(r.counts.values())
    return f"{n} of {r.planned}" if r.planned > n else str(n)


def status_table(rows: list[RunRow], among: list[str]) -> Table:
    """Runs by outcome: the run by its unique prefix (never wrapped), a type column when
    a run has several, a driver column when one is known."""
    short = short_ids({r.run_id for r in rows}, among)
    table = Table(title=TITLE)
    table.add_column("run", no_wrap=True)
    kinds = any(r.kind for r in rows)
    drivers = any(r.driver for r in rows)
    if kinds:
        table.add_column("type", no_wrap=True)
    shown = outcome_columns([r.counts for r in rows])
    for key in shown:
        table.add_column(key, justify="right", no_wrap=True)
    table.add_column("total", justify="right", no_wrap=True)
    if drivers:
        table.add_column("driver", no_wrap=True)
    for r in rows:
        cells = [str(r.counts.get(k, 0)) for k in shown]
        driver = "[bold red]gone[/]" if r.driver == "gone" else r.driver
        table.add_row(
            short[r.run_id],
            *([r.kind] if kinds else []),
            *cells,
            _total(r),
            *([driver] if drivers else []),
        )
    return table


def status_view(rows: list[RunRow], among: list[str], width: int) -> RenderableType:
    """:func:`status_table` when it fits ``width`` whole; else a block per run: its id
    (and ``driver gone``) on a line, a sentence of counts per type beneath it."""
    table = status_table(rows, among)
    if table_width(table) <= width:
        return table
    short = short_ids({r.run_id for r in rows}, among)
    blocks: dict[str, Block] = {}
    for r in rows:
        note = f"driver {r.driver}" if r.driver else ""
        block = blocks.setdefault(r.run_id, Block(short[r.run_id], note))
        items = [f"{k} {r.counts[k]}" for k in outcome_columns([r.counts]) if r.counts[k]]
        block.rows.append([r.kind, f"{_total(r)} tasks", *items])
    return Group(Text(TITLE, style="italic"), *sentences(list(blocks.values()), width))


def status(
    run_id: str | None = typer.Argument(
        None, help="A run id or a unique prefix of one; all runs when omitted."
    ),
    db: str = DbOption,
    config: Path | None = ConfigOption,
    cluster: str | None = typer.Option(
        None, "--cluster", help="Ask a running cluster's scheduler (host:port) instead of --db."
    ),
) -> None:
    """Tasks by outcome, for one run or for every run; whether each run's process lives."""
    if cluster is not None:
        from megaflow.cli import serve_cmd

        serve_cmd.cluster_status(cluster, run_id, cluster_config=config)
        return
    meta = metadata_config(db, config)

    async def go(store: MetadataStore) -> tuple[list[RunRow], list[str]]:
        rows = await status_rows(store, meta, run_id)
        return rows, [r.id for r in await store.list_runs()]

    rows, among = with_store(db, go, config)
    if not rows:
        console.print("no runs yet")
        return
    console.print(status_view(rows, among, console.width))
    gone = sorted({r.run_id for r in rows if r.driver == "gone"})
    for rid in gone:
        console.print(
            f"driver gone: the process of {rid} ended with tasks unfinished; they will not "
            f"move until `megaflow run --resume {rid.removesuffix('-control')}`",
            highlight=False,
        )

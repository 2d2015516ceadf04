"""Tables the inspection commands share: tasks by outcome per run, and task ids
shown relative to their run.

A run id is long (``quickstart-20261201-071930-08c4``) and every task id
starts with it, so a table of tasks prints the run id once above it and each
task by the rest of its id. The id column is given the width its ids need
(what the other columns leave of the terminal) and folds, never cuts, an id
that is longer still.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.table import Table

from megaflow.core.outcomes import OUTCOMES

MIN_ID_WIDTH = 12


def relative_id(task_id: str, run_id: str) -> str:
    """``<run>/<task>/<n>`` as ``<task>/<n>``; an id not under the run stays whole."""
    prefix = f"{run_id}/"
    return task_id[len(prefix) :] if task_id.startswith(prefix) and task_id != prefix else task_id


def id_width(ids: Iterable[str], width: int, others: Sequence[int]) -> int:
    """The id column's width: its longest id, or what a ``width``-wide terminal leaves
    beside columns of widths ``others`` (and the borders), whichever is less."""
    borders = 3 * (len(others) + 1) + 1
    room = width - borders - sum(others)
    return max(MIN_ID_WIDTH, min(max((len(i) for i in ids), default=0), room))


def outcome_columns(counts: Iterable[dict[str, int]]) -> list[str]:
    """The outcomes that occur in any of ``counts``, in :data:`OUTCOMES` order."""
    seen = {k for c in counts for k, n in c.items() if n}
    return [k for k in OUTCOMES if k in seen] + sorted(seen - set(OUTCOMES))


def outcome_table(title: str, rows: Sequence[tuple[str, str, dict[str, int]]], width: int) -> Table:
    """One row per run (id, tasks by outcome); a column for each outcome that occurs,
    and the run's name where its id does not start with it."""
    shown = outcome_columns(counts for _, _, counts in rows)
    names = any(name and not rid.startswith(name) for rid, name, _ in rows)
    table = Table(title=title)
    others = [len(k) for k in (*shown, "total")] + ([12] if names else [])
    table.add_column(
        "run", overflow="fold", min_width=id_width((r for r, _, _ in rows), width, others)
    )
    if names:
        table.add_column("name", overflow="fold")
    for key in shown:
        table.add_column(key, justify="right")
    table.add_column("total", justify="right")
    for rid, name, counts in rows:
        cells = [str(counts.get(k, 0)) for k in shown]
        table.add_row(rid, *([name] if names else []), *cells, str(sum(counts.values())))
    return table

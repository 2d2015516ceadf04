"""``megaflow train diagnose METRICS``: compute, communication and idle time per rank.

METRICS is the JSON-lines log a trainer writes when ``train.metrics_path``
is set. Prints each rank's time per step split into compute, communication
and idle, the rank the others wait for, and the last steps one by one;
``--json`` prints the totals as JSON. A missing or malformed log exits 2
naming the file and line.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import typer
from rich.table import Table

from megaflow.cli.common import console, fail
from megaflow.core.errors import InvalidInput
from megaflow.train.diagnosis import Diagnosis, diagnose, read_log


def _ms(s: float, steps: int) -> str:
    return f"{1000 * s / max(steps, 1):.1f}"


def _show(path: Path, d: Diagnosis, last: int) -> None:
    console.print(
        f"[bold]{path}[/]: {len(d.steps)} steps, strategy {d.strategy}, {len(d.ranks)} rank(s)",
        highlight=False,
    )
    table = Table(title="per step, mean")
    for col in ("rank", "steps", "compute ms", "comm ms", "idle ms", "compute", "comm", "idle"):
        table.add_column(col, justify="right")
    for r in d.ranks:
        mark = " *" if r.rank == d.straggler else ""
        table.add_row(
            f"{r.rank}{mark}",
            str(r.steps),
            _ms(r.compute_s, r.steps),
            _ms(r.comm_s, r.steps),
            _ms(r.idle_s, r.steps),
            f"{r.share(r.compute_s):.0%}",
            f"{r.share(r.comm_s):.0%}",
            f"{r.share(r.idle_s):.0%}",
        )
    console.print(table)
    if last and d.steps:
        steps = Table(title=f"last {min(last, len(d.steps))} steps: compute / comm / idle ms")
        steps.add_column("step", justify="right")
        for r in d.ranks:
            steps.add_column(f"rank {r.rank}", justify="right")
        for rec in d.steps[-last:]:
            cells = [
                f"{1000 * t['compute_s']:.0f} / {1000 * t['comm_s']:.0f} / {1000 * t['idle_s']:.0f}"
                for t in rec.get("ranks", [])
            ]
            steps.add_row(str(rec.get("step", "?")), *cells)
        console.print(steps)
    if d.straggler is not None:
        console.print(f"* rank {d.straggler}: the others wait for it", highlight=False)
    console.print(d.verdict(), highlight=False)


def diagnose_cmd(
    metrics: Path = typer.Argument(..., help="A trainer metrics log (train.metrics_path)."),
    last: int = typer.Option(5, "--last", min=0, help="Also show the last N steps one by one."),
    as_json: bool = typer.Option(False, "--json", help="Print the per-rank totals as JSON."),
) -> None:
    """Per-step compute, communication and idle time of every trainer rank."""
    try:
        d = diagnose(read_log(metrics))
    except InvalidInput as exc:
        fail(str(exc))
    if as_json:
        out = {
            "steps": len(d.steps),
            "strategy": d.strategy,
            "straggler": d.straggler,
            "ranks": [asdict(r) for r in d.ranks],
            "verdict": d.verdict(),
        }
        console.print_json(json.dumps(out))
        return
    _show(metrics, d, last)

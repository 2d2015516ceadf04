"""``megaflow train compare TRAINED CONTROL``: a run against its shuffled-reward control.

TRAINED and CONTROL are the ``curve.json`` files (or their PNGs) of two runs
of one config, the second with ``--control shuffled``. Prints the held-out
figures of both (sampled pass@1 with its 95% interval, greedy, malformed)
and the paired difference, and each held-out set's when the runs held out
task sets; exits 1 unless the control stayed inside the
interval it started in and the trained run beat it
(:mod:`megaflow.app.training.compare`), 2 for a file that is not such a curve.
"""

from __future__ import annotations

from pathlib import Path

import typer

from megaflow.app.training.compare import compare, load_curve, table
from megaflow.cli.common import EXIT_FAILED, console, fail
from megaflow.core.errors import InvalidInput


def compare_cmd(
    trained: Path = typer.Argument(..., help="curve.json of the trained run."),
    control: Path = typer.Argument(..., help="curve.json of its --control shuffled run."),
) -> None:
    """Set a training run against its shuffled-reward control; exit 1 unless it wins."""
    try:
        verdict = compare(load_curve(trained), load_curve(control))
    except InvalidInput as exc:
        fail(str(exc))
    for line in table(verdict):
        console.print(line, highlight=False, soft_wrap=True)
    if not verdict.ok:
        raise typer.Exit(EXIT_FAILED)

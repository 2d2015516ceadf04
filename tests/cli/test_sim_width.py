"""`megaflow sim` honours the terminal's width: the report fits 80 and 120 columns
with every figure whole (turned on its side when the wide table does not fit)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from megaflow.cli.main import app

runner = CliRunner()


@pytest.mark.parametrize("columns", [80, 120])
def test_the_report_fits_and_keeps_every_figure(columns: int) -> None:
    args = ["sim", "--instances", "4", "--tasks", "60", "--compare", "fifo,priority,fair"]
    res = runner.invoke(app, args, env={"COLUMNS": str(columns)})
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert max(len(line) for line in lines) <= columns, res.output
    assert "…" not in res.output
    wide = runner.invoke(app, args, env={"COLUMNS": "250"})
    rows = [line for line in wide.output.splitlines() if line.startswith("│ ")]
    fifo = next(r for r in rows if r.startswith("│ fifo "))
    figures = [c.strip() for c in fifo.strip("│").split("│")][1:-1]
    text = " ".join(res.output.split())
    for figure in figures:  # what the wide table shows, the narrow one shows whole
        assert figure in text


@pytest.mark.parametrize("columns", [80, 120])
def test_the_cost_tables_fit(columns: int) -> None:
    res = runner.invoke(app, ["sim", "--cost", "--tasks", "100"], env={"COLUMNS": str(columns)})
    assert res.exit_code == 0, res.output
    assert max(len(line) for line in res.output.splitlines()) <= columns
    assert "centralised" in res.output


@pytest.mark.parametrize("columns", [80, 120])
def test_a_narrow_report_keeps_its_title_on_one_line(columns: int) -> None:
    args = ["sim", "--instances", "4", "--tasks", "60"]  # one policy: a turned, narrow table
    res = runner.invoke(app, args, env={"COLUMNS": str(columns)})
    assert res.exit_code == 0, res.output
    (title,) = [line for line in res.output.splitlines() if "4 instances" in line]
    assert "60 tasks, shared queues" in title, res.output
    assert max(len(line) for line in res.output.splitlines()) <= columns

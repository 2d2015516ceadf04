"""`megaflow regrade RUN`: a stored run graded again without inference, with its own
grader (nothing changes) and with another (the changed rewards are named)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from megaflow.cli.main import app
from tests.grading.test_python_run import _config

runner = CliRunner()


def _run_id(output: str) -> str:
    line = next(x for x in output.splitlines() if x.startswith("run "))
    return line.split()[1].rstrip(":")


def test_regrade_with_the_runs_grader_and_with_another(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    res = runner.invoke(app, ["run", str(cfg)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    run = _run_id(res.output)

    # the run by a unique prefix, as status prints it
    same = runner.invoke(app, ["regrade", run[:-3], "--config", str(cfg), "--json"])
    assert same.exit_code == 0, same.output
    rows = [json.loads(line) for line in same.output.splitlines() if line.startswith("{")]
    assert sorted((r["before"], r["after"], r["changed"]) for r in rows) == [
        (0.0, 0.0, False), (1.0, 1.0, False),
    ]  # fmt: skip

    other = tmp_path / "grading.yaml"
    fn = "tests.grading.rewards_for_tests.graded_parts"  # {correct, short: 1}: their mean
    other.write_text(f"grading: {{type: python, function: {fn}}}\n")
    res = runner.invoke(app, ["regrade", run, "--config", str(cfg), "--grading", str(other)],
                        env={"COLUMNS": "200"})  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "2 samples: 1 changed, 0 skipped" in res.output
    assert "0.500" in res.output


def test_regrade_refuses_a_bad_grading_file_and_an_unknown_run(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    assert runner.invoke(app, ["run", str(cfg)], env={"COLUMNS": "200"}).exit_code == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("grading: {type: judge}\n")
    res = runner.invoke(app, ["regrade", "x", "--config", str(cfg), "--grading", str(bad)])
    assert res.exit_code == 2
    assert "not a grading section" in res.output
    res = runner.invoke(app, ["regrade", "no-such-run", "--config", str(cfg)])
    assert res.exit_code == 2
    assert "no-such-run" in res.output

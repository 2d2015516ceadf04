"""`megaflow run` says truly where its results went."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from megaflow.cli.main import app

runner = CliRunner()


def _config(tmp: Path, metadata: dict[str, str]) -> Path:
    cfg = {
        "name": "where",
        "tasks": {"type": "inline", "tasks": [{"id": "t0", "payload": {"x": 0}}]},
        "agent": {"type": "builtin", "max_steps": 2},
        "model": {"type": "scripted", "bash": ["echo hi"]},
        "environment": {"runtime": {"type": "dummy"}},
        "storage": {"metadata": metadata, "artifacts": {"type": "local", "root": str(tmp / "a")}},
    }
    path = tmp / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _results_line(output: str) -> str:
    """The results message, its lines joined: the console may wrap it at any width."""
    return " ".join(output[output.index("results: ") :].split())


def test_a_memory_store_is_said_to_be_gone_with_the_process(tmp_path: Path) -> None:
    res = runner.invoke(
        app, ["run", str(_config(tmp_path, {"type": "memory"}))], env={"COLUMNS": "300"}
    )
    line = _results_line(res.output)
    assert line.startswith("results: memory metadata in this process's memory (not kept"), line
    assert "megaflow results" in line
    assert "cannot read them" in line
    assert "(server)" not in res.output
    assert f"under{tmp_path}/a/runs/where-" in line.replace(" ", "")  # a long path may fold


def test_a_sqlite_file_is_named_with_the_command_that_reads_it(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    res = runner.invoke(
        app,
        ["run", str(_config(tmp_path, {"type": "sqlite", "path": str(db)}))],
        env={"COLUMNS": "300"},
    )
    line = _results_line(res.output)
    assert line.replace(" ", "").startswith(f"results:sqlitemetadataat{db}->`megaflowresultswhere-")

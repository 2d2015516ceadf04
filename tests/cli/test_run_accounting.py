"""`megaflow run` counts every sample: errored runs exit 1, with real times."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import yaml
from typer.testing import CliRunner

from megaflow.app.summary import summarize_arm
from megaflow.cli.main import app
from megaflow.storage.sqlite import SqliteMetadataStore

runner = CliRunner()


def _config(tmp: Path, **over: object) -> Path:
    cfg: dict[str, object] = {
        "name": "acct",
        "tasks": {
            "type": "inline",
            "tasks": [{"id": f"t{i}", "payload": {"x": i}} for i in range(2)],
        },
        "agent": {"type": "builtin", "max_steps": 3},
        "model": {"type": "scripted", "bash": ["echo hi"]},
        "environment": {"runtime": {"type": "dummy"}},
        "scheduler": {"retry": {"base_s": 0.0, "jitter": 0.0}},
        "storage": {
            "metadata": {"type": "sqlite", "path": str(tmp / "m.db")},
            "artifacts": {"type": "local", "root": str(tmp / "art")},
        },
    }
    cfg.update(over)
    path = tmp / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _run_id(output: str) -> str:
    line = next(x for x in output.splitlines() if x.startswith("run "))
    return line.split()[1].rstrip(":")


def _summary(db: Path, run_id: str) -> tuple[float | None, int, int, int]:
    async def go() -> tuple[float | None, int, int, int]:
        async with SqliteMetadataStore(str(db)) as store:
            a = await summarize_arm(store, run_id, "main", 1)
        return a.task_p50_s, a.metrics.errors, a.ungraded, a.metrics.samples

    return asyncio.run(go())


def test_a_run_where_every_sample_errored_exits_1_with_real_times(tmp_path: Path) -> None:
    # no problem statement: the agent fails on its own (AgentError) on every task
    res = runner.invoke(app, ["run", str(_config(tmp_path))], env={"COLUMNS": "200"})
    assert res.exit_code == 1, res.output
    assert "FAIL: main: not every sample errored" in res.output
    run_id = _run_id(res.output)
    p50, errors, masked, graded = _summary(tmp_path / "m.db", run_id)
    assert (errors, masked, graded) == (2, 0, 2)  # graded samples with reward 0, not lost
    assert p50 is not None
    assert p50 > 0.0
    rows = json.loads(
        runner.invoke(app, ["results", run_id, "--json", "--db", str(tmp_path / "m.db")]).stdout
    )
    assert [(r["state"], r["reward"], r["error_kind"], r["ungraded"]) for r in rows] == [
        ("succeeded", 0.0, "agent", False)
    ] * 2
    assert all(r["artifacts"]["trajectory"] for r in rows)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_infra_failure_past_its_retries_is_masked_and_exits_1(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    cfg = _config(
        tmp_path,
        tasks={"type": "inline", "tasks": [{"id": "t0", "payload": {"prompt": "hi"}}]},
        model={"type": "openai", "base_url": url, "model": "m", "retries": 0},
        max_attempts=2,
    )
    # past the endpoint check at start (it would refuse this run): the failure mid-run
    res = runner.invoke(app, ["run", str(cfg), "--no-check-models"], env={"COLUMNS": "200"})
    assert res.exit_code == 1, res.output
    assert "every sample graded" in res.output
    run_id = _run_id(res.output)
    p50, errors, masked, graded = _summary(tmp_path / "m.db", run_id)
    assert (errors, masked, graded) == (1, 1, 0)
    assert p50 is not None
    assert p50 > 0.0  # the attempts' real time, not a 0
    (row,) = json.loads(
        runner.invoke(app, ["results", run_id, "--json", "--db", str(tmp_path / "m.db")]).stdout
    )
    assert (row["state"], row["attempts"], row["ungraded"]) == ("failed", 2, True)
    assert row["reward"] is None  # never a 0 for a sample that has no grade
    # the summary counts the run's task, graded or not (never "1 (0 x 1)")
    (samples,) = [x for x in res.output.splitlines() if "samples (tasks x samples)" in x]
    assert "1 (1 x 1)" in samples, res.output
    logs = runner.invoke(
        app,
        ["logs", "t0/0", "--run", run_id, "--db", str(tmp_path / "m.db")],
        env={"COLUMNS": "200"},
    )
    assert logs.exit_code == 0, logs.output
    # the words of status and results, and no reward rather than a 0
    assert "state failed: infra error, no reward (ungraded)" in logs.output, logs.output
    assert "reward 0.000" not in logs.output


def test_a_train_run_at_temperature_0_warns_at_submit(tmp_path: Path) -> None:
    cfg = _config(
        tmp_path,
        task_type="train",
        samples=2,
        tasks={"type": "inline", "tasks": [{"id": "t0", "payload": {"prompt": "hi"}}]},
        agent={"type": "builtin", "max_steps": 2, "temperature": 0.0},
    )
    res = runner.invoke(app, ["run", str(cfg)], env={"COLUMNS": "200"})
    assert "warning: train run with samples: 2 at temperature 0" in res.output, res.output
    assert "likely identical" in res.output

"""`examples/cluster.yaml` is a valid config for `megaflow up`, and `export`
without `-o` writes to stdout."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pyarrow.parquet as pq
from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.core.tasks import RunSpec, TaskResult, TaskSpec
from megaflow.rpc.config import load_cluster_config
from megaflow.storage.sqlite import SqliteMetadataStore

runner = CliRunner()
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cluster.yaml"


def test_the_cluster_example_validates_and_names_every_service() -> None:
    cfg = load_cluster_config(EXAMPLE)  # what `megaflow up` loads
    assert cfg.scheduler.executor == "agent"
    assert cfg.agent.executor == "app"
    ports = [cfg.endpoint(s).port for s in ("scheduler", "environment", "agent", "model")]
    assert all(not 10002 <= p <= 19999 for p in ports)  # outside Ray's worker range
    assert cfg.scheduler.storage.metadata.type == "sqlite"
    res = runner.invoke(app, ["config", "validate", str(EXAMPLE)])
    assert res.exit_code == 0, res.output
    assert "cluster config" in res.output


def test_a_bad_cluster_config_names_its_field(tmp_path: Path) -> None:
    bad = tmp_path / "cluster.yaml"
    bad.write_text("scheduler:\n  port: twenty\n")
    res = runner.invoke(app, ["config", "validate", str(bad)])
    assert res.exit_code == 2
    assert "scheduler.port" in res.output
    lost = tmp_path / "run.yaml"  # a run config without its tasks is still read as one
    lost.write_text("name: r\nsamples: 2\n")
    res = runner.invoke(app, ["config", "validate", str(lost)])
    assert res.exit_code == 2
    assert "tasks" in res.output


def _seed(db: Path) -> None:
    async def go() -> None:
        async with SqliteMetadataStore(str(db)) as s:
            await s.create_run(RunSpec(id="r"))
            await s.add_tasks([TaskSpec(id=f"r/t{i}/0", run_id="r") for i in range(2)])
            await s.put_result(TaskResult(task_id="r/t0/0", success=True, reward=1.0))

    asyncio.run(go())


def test_export_without_out_writes_to_stdout(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    _seed(db)
    res = CliRunner().invoke(app, ["export", "r", "--db", str(db)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert [r["task_id"] for r in rows] == ["r/t0/0", "r/t1/0"]
    assert "wrote 2 rows to stdout" in res.stderr
    assert not list(tmp_path.glob("*.jsonl"))  # no file left behind
    res = CliRunner().invoke(app, ["export", "r", "--format", "parquet", "--db", str(db)])
    assert res.exit_code == 0, res.stderr
    table = pq.read_table(io.BytesIO(res.stdout_bytes))
    assert table.column("task_id").to_pylist() == ["r/t0/0", "r/t1/0"]

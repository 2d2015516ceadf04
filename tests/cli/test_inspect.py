import asyncio
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.core.states import TaskState as S
from megaflow.core.tasks import RunSpec, TaskResult, TaskSpec
from megaflow.storage.abstract import Transition
from megaflow.storage.sqlite import SqliteMetadataStore

runner = CliRunner()


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "m.db")

    async def seed() -> None:
        async with SqliteMetadataStore(path) as s:
            await s.create_run(RunSpec(id="run-1", name="demo"))
            await s.add_tasks([TaskSpec(id=f"run-1/t{i}", run_id="run-1") for i in range(3)])
            chain = [S.SCHEDULED, S.STARTING, S.RUNNING, S.GRADING, S.SUCCEEDED]
            await s.transition_many([Transition("run-1/t0", x) for x in chain])
            await s.put_result(TaskResult(task_id="run-1/t0", success=True, reward=1.0))

    asyncio.run(seed())
    return path


def test_version() -> None:
    res = runner.invoke(app, ["version"])
    assert res.exit_code == 0
    assert res.output.startswith("megaflow 0.")


def test_status(db: str) -> None:
    res = runner.invoke(app, ["status", "--db", db])
    assert res.exit_code == 0, res.output
    assert "run-1" in res.output
    res = runner.invoke(app, ["status", "run-9", "--db", db])
    assert res.exit_code == 2
    assert "run-9" in res.output


def test_results_table_and_json(db: str) -> None:
    res = runner.invoke(app, ["results", "run-1", "--db", db])
    assert res.exit_code == 0, res.output
    assert "3 tasks, 1 with results, 1 resolved, 0 ungraded" in res.output
    res = runner.invoke(app, ["results", "run-1", "--json", "--db", db])
    rows = json.loads(res.stdout)
    assert [r["state"] for r in rows] == ["succeeded", "queued", "queued"]
    assert rows[0]["reward"] == 1.0


def test_export_jsonl_and_parquet(db: str, tmp_path: Path) -> None:
    out = tmp_path / "x.jsonl"
    res = runner.invoke(app, ["export", "run-1", "--db", db, "-o", str(out)])
    assert res.exit_code == 0, res.output
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["task_id"] for r in lines] == ["run-1/t0", "run-1/t1", "run-1/t2"]
    pq_out = tmp_path / "x.parquet"
    res = runner.invoke(
        app, ["export", "run-1", "--format", "parquet", "--db", db, "-o", str(pq_out)]
    )
    assert res.exit_code == 0, res.output
    table = pq.read_table(pq_out)
    assert table.num_rows == 3
    assert table.column("success").to_pylist() == [True, None, None]
    res = runner.invoke(app, ["export", "run-1", "--format", "csv", "--db", db])
    assert res.exit_code == 2


def test_missing_database_is_a_clear_error(tmp_path: Path) -> None:
    res = runner.invoke(app, ["status", "--db", str(tmp_path / "none.db")])
    assert res.exit_code == 2
    assert "no MegaFlow database" in res.output

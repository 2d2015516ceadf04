"""`status`, `results`, `top` and `run --resume` on the store a config names (`--config`).

The config is a run config (its `storage`) or a cluster config (its
scheduler's `storage`). SQLite needs nothing; PostgreSQL is the real server
of the test session.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from psycopg import sql
from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.core.tasks import RunSpec, TaskSpec
from megaflow.storage.config import StorageConfig
from megaflow.storage.factory import make_metadata_store
from tests.fixtures.sql_servers import PostgresServer

runner = CliRunner()


def run_config(storage: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "stored",
        "tasks": {
            "type": "inline",
            "tasks": [{"id": t, "payload": {"prompt": f"task {t}"}} for t in ("a", "b")],
        },
        "agent": {"type": "builtin", "max_steps": 2},
        "model": {"type": "replay", "play": "empty"},
        "environment": {"runtime": {"type": "dummy"}},
        "storage": storage,
    }


def write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def seed(metadata: dict[str, Any]) -> None:
    async def go() -> None:
        store = make_metadata_store(StorageConfig.model_validate({"metadata": metadata}).metadata)
        async with store:
            await store.create_run(RunSpec(id="run-1", name="demo"))
            await store.add_tasks([TaskSpec(id=f"run-1/t{i}", run_id="run-1") for i in range(2)])

    asyncio.run(go())


def check_inspection(config: Path) -> None:
    res = runner.invoke(app, ["status", "--config", str(config)])
    assert res.exit_code == 0, res.output
    assert "run-1" in res.output
    res = runner.invoke(app, ["results", "run-1", "--config", str(config)])
    assert res.exit_code == 0, res.output
    assert "2 tasks, 0 with results" in res.output
    res = runner.invoke(app, ["top", "--once", "--config", str(config)])
    assert res.exit_code == 0, res.output
    assert "run-1" in res.output
    res = runner.invoke(app, ["status", "run-9", "--config", str(config)])
    assert res.exit_code == 2
    assert "run-9" in res.output


def test_a_run_config_names_a_sqlite_store(tmp_path: Path) -> None:
    metadata = {"type": "sqlite", "path": str(tmp_path / "m.db")}
    seed(metadata)
    check_inspection(write(tmp_path / "run.yaml", run_config({"metadata": metadata})))


def test_a_missing_store_or_config_is_a_clear_error(tmp_path: Path) -> None:
    metadata = {"type": "sqlite", "path": str(tmp_path / "none.db")}
    config = write(tmp_path / "run.yaml", run_config({"metadata": metadata}))
    res = runner.invoke(app, ["status", "--config", str(config)])
    assert res.exit_code == 2
    assert "no MegaFlow database" in res.output
    res = runner.invoke(app, ["results", "r", "--config", str(tmp_path / "absent.yaml")])
    assert res.exit_code == 2
    assert "absent.yaml" in res.output


@pytest.fixture
def pg_metadata(postgres_server: PostgresServer) -> Any:
    schema = f"cli_{uuid.uuid4().hex[:10]}"
    yield {"type": "postgres", "dsn": postgres_server.dsn, "db_schema": schema}
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.mark.services
def test_run_and_cluster_configs_name_a_postgres_store(
    pg_metadata: dict[str, Any], tmp_path: Path
) -> None:
    seed(pg_metadata)
    check_inspection(write(tmp_path / "run.yaml", run_config({"metadata": pg_metadata})))
    cluster = {
        "state_dir": str(tmp_path / "state"),
        "scheduler": {"storage": {"metadata": pg_metadata}},
    }
    check_inspection(write(tmp_path / "cluster.yaml", cluster))


@pytest.mark.services
def test_resume_reads_the_stored_config_from_postgres(
    pg_metadata: dict[str, Any], tmp_path: Path
) -> None:
    storage = {"metadata": pg_metadata, "artifacts": {"type": "local", "root": str(tmp_path / "a")}}
    config = write(tmp_path / "run.yaml", run_config(storage))
    res = runner.invoke(app, ["run", str(config)])
    assert res.exit_code == 0, res.output
    run_id = re.search(r"run (stored-\S+):", res.output)
    assert run_id is not None, res.output
    res = runner.invoke(app, ["run", "--resume", run_id.group(1), "--config", str(config)])
    assert res.exit_code == 0, res.output
    assert "0 tasks in" in res.output  # the resume ran none: the run had finished
    assert "(2 had finished before this resume)" in " ".join(res.output.split())
    res = runner.invoke(app, ["results", run_id.group(1), "--config", str(config), "--json"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["run", "--resume", "stored-none", "--config", str(config)])
    assert res.exit_code == 2
    assert "stored-none" in res.output


def test_a_memory_metadata_store_is_refused_with_the_file_named(tmp_path: Path) -> None:
    config = write(tmp_path / "run.yaml", run_config({"metadata": {"type": "memory"}}))
    res = runner.invoke(app, ["status", "--config", str(config)])
    assert res.exit_code == 2, res.output
    assert "storage.metadata is 'memory'" in res.output
    assert "run.yaml" in res.output

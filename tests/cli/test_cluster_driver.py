"""A cluster's runs show their driver, the scheduler service, as alive or gone.

The real scheduler service (``megaflow.app.serve.serve``, as ``megaflow up``
starts it) over a SQLite store takes the scheduler service's lease. A run
in its store with unfinished tasks and no job lease of its own (as
``megaflow submit`` leaves it) is shown by ``megaflow status`` and the
dashboard's run summary with its driver alive while the service runs, and
gone once it has stopped (its lease ended) or been killed (its process gone).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from megaflow.app.serve import serve
from megaflow.cli.main import app
from megaflow.core.tasks import RunSpec, TaskSpec
from megaflow.dashboard.summary import run_summary
from megaflow.rpc.auth import generate_token
from megaflow.rpc.config import ClusterConfig
from megaflow.storage.lease import SCHEDULER_LEASE
from megaflow.storage.sqlite import SqliteMetadataStore
from tests.fixtures.servers import free_port

runner = CliRunner()
MEGAFLOW = str(Path(sys.executable).parent / "megaflow")
RUN = "submitted-1"


def _cluster(tmp: Path) -> dict[str, Any]:
    return {
        "auth": {"token_file": str(tmp / "token")},
        "state_dir": str(tmp / "state"),
        "scheduler": {
            "port": free_port(), "executor": "noop",
            "storage": {"metadata": {"type": "sqlite", "path": str(tmp / "m.db")},
                        "artifacts": {"type": "local", "root": str(tmp / "art")}},
        },
    }  # fmt: skip


async def _unfinished_run(db: Path) -> None:
    """A run as `megaflow submit` leaves it in the store: no lease of its own, tasks queued
    (written beside the service, so they stay queued for the status to see)."""
    store = SqliteMetadataStore(str(db))
    async with store:
        await store.create_run(RunSpec(id=RUN))
        await store.add_tasks([TaskSpec(id=f"{RUN}/t{n}/0", run_id=RUN) for n in range(2)])


def _driver(db: Path) -> str:
    res = runner.invoke(app, ["status", "--db", str(db)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    [row] = [line for line in res.output.splitlines() if line.strip().startswith("│ sub")]
    return row


async def _dashboard_driver(db: Path) -> str | None:
    store = SqliteMetadataStore(str(db))
    async with store:
        driver: str | None = (await run_summary(store, RUN))["driver"]
        return driver


async def test_the_scheduler_service_is_the_driver_of_submitted_runs(tmp_path: Path) -> None:
    cfg = ClusterConfig.model_validate(_cluster(tmp_path))
    db = tmp_path / "m.db"
    token, stop, ready = generate_token(), asyncio.Event(), list[str]()
    on_ready = lambda s, t: ready.append(s)  # noqa: E731
    service = asyncio.create_task(serve(["scheduler"], cfg, token, stop, on_ready))
    try:
        while not ready:
            assert not service.done(), service
            await asyncio.sleep(0.05)
        await _unfinished_run(db)
        assert "alive" in await asyncio.to_thread(_driver, db)
        assert await _dashboard_driver(db) == "alive"
    finally:
        stop.set()
        await service
    assert "gone" in await asyncio.to_thread(_driver, db)  # stopped: its lease ended
    assert await _dashboard_driver(db) == "gone"


def test_a_killed_scheduler_service_is_gone(tmp_path: Path) -> None:
    conf = tmp_path / "cluster.yaml"
    conf.write_text(yaml.safe_dump(_cluster(tmp_path)))
    (tmp_path / "token").write_text(generate_token())
    os.chmod(tmp_path / "token", 0o600)
    db = tmp_path / "m.db"
    proc = subprocess.Popen(
        [MEGAFLOW, "serve", "scheduler", "--config", str(conf)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        asyncio.run(_wait_lease(db, proc))
        asyncio.run(_unfinished_run(db))
        assert "alive" in _driver(db)
    finally:
        proc.send_signal(signal.SIGKILL)  # no clean stop: the lease stays, its holder is gone
        proc.wait(timeout=30)
    assert "gone" in _driver(db)
    assert asyncio.run(_dashboard_driver(db)) == "gone"


async def _wait_lease(db: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        if db.exists():
            store = SqliteMetadataStore(str(db))
            async with store:
                if await store.get_lease(SCHEDULER_LEASE) is not None:
                    return
        await asyncio.sleep(0.2)
    raise AssertionError("the scheduler service took no lease in 120 s")

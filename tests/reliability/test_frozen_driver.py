"""A driver frozen past its lease, whose run another process took over, stops.

The mini-SWE job (metadata in a real PostgreSQL, ``lease_ttl_s: 3``) runs in
a ``megaflow run`` process. Once a task has finished, that process group is
SIGSTOPped; once its lease has ended, ``megaflow run --resume`` takes the
run over. Then the first process is let go on (SIGCONT). Checked: it exits 1
by itself, saying it lost the driver lease to another process, with no
traceback (a calibration left running by the stop once printed one); the second
finishes the run, exit 0; every gold sample rewarded 1.0 and every control 0,
and the books add up.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import pytest

from megaflow.core.states import TaskState
from megaflow.storage.postgres import PostgresMetadataStore
from tests.fixtures.sql_servers import PostgresServer
from tests.reliability.conftest import LeakCheck
from tests.reliability.ledger import check_ledger, read_ledger
from tests.reliability.store_chaos import REPO, RunProcess, graded_job, until
from tests.reliability.test_second_driver import _state

pytestmark = [pytest.mark.slow, pytest.mark.services]
LIMIT = 3


def _owner(dsn: str, schema: str, run_id: str) -> str:
    import psycopg

    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            f"SELECT owner FROM {schema}.leases WHERE run_id = %s", (run_id,)
        ).fetchone()
    return "" if row is None else str(row[0])


async def test_a_frozen_driver_that_lost_its_lease_stops(
    tmp_path: Path, leaks: LeakCheck, postgres_server: PostgresServer
) -> None:
    dsn, schema = postgres_server.dsn, f"frozen_{uuid.uuid4().hex[:10]}"
    storage = {
        "metadata": {"type": "postgres", "dsn": dsn, "db_schema": schema},
        "outage": {"deadline_s": 30, "lease_ttl_s": 3, "spool_dir": str(tmp_path / "spool")},
    }
    tasks = {"type": "swebench", "path": str(REPO / "tasks/mini-swe"), "limit": LIMIT}
    first = RunProcess(tmp_path, graded_job(tmp_path, storage, tasks=tasks))
    second: RunProcess | None = None
    try:
        leaks.watch(first.proc.pid)
        until(lambda: _state(dsn, schema)[1] >= 1, "a task finished", 120, first)
        run_id, _, _ = _state(dsn, schema)
        assert run_id is not None
        os.killpg(first.proc.pid, signal.SIGSTOP)
        until(lambda: (_state(dsn, schema)[2] or 0) < time.time() - 0.5, "the lease ended", 20)
        config = str(tmp_path / "run.yaml")
        second = RunProcess(tmp_path, None, "--resume", run_id, "--config", config)
        leaks.watch(second.proc.pid)
        until(lambda: f":{second.proc.pid}:" in _owner(dsn, schema, run_id), "taken over", 60)
        os.killpg(first.proc.pid, signal.SIGCONT)
        code = first.wait(60)
        out = first.output
        assert code == 1, out[-3000:]
        assert f"lost the driver lease of run {run_id}" in out, out[-3000:]
        assert f":{second.proc.pid}:" in out, out[-3000:]  # names who took it
        assert "Traceback" not in out, out[-3000:]
        code = second.wait(120)
        assert code == 0, second.output[-4000:]
        assert "Traceback" not in second.output, second.output[-4000:]
    finally:
        if first.proc.poll() is None:
            os.killpg(first.proc.pid, signal.SIGCONT)
        first.kill()
        if second is not None:
            second.kill()
    async with PostgresMetadataStore(dsn, schema=schema) as md:
        for run in await md.list_runs():
            control = run.id.endswith("-control")
            led = await read_ledger(md, run.id)
            check_ledger(led, LIMIT)
            assert led.states == {TaskState.SUCCEEDED: LIMIT}, (run.id, led.states)
            for tid, res in led.results.items():
                assert res.reward == (0.0 if control else 1.0), (tid, res)

"""One driver per run on a server store: a second ``megaflow run --resume`` of a
live run is refused, and a SIGKILLed driver's run is resumed once its lease ends.

The run is the mini-SWE job (gold main arm, empty control arm, local
sandboxes) with its metadata in a real PostgreSQL, where no local lock file
can see the first process. While the first ``megaflow run`` drives the run,
``megaflow run --resume`` of it exits 2 naming the first process's lease
and runs nothing. Then the first process group is SIGKILLed mid-run; once its
lease has ended, ``--resume`` finishes the run; the killed driver's lease is
made that of a driver on another host (which this host cannot see die), so an
earlier ``--resume`` is refused and only the lease's end frees the run.
Checked: every gold sample rewarded 1.0 and every control 0; tasks finished
before the kill were not run again, and each task in flight at the kill has
its lost attempt and exactly one more: nothing ran twice.
"""

from __future__ import annotations

import socket
import time
import uuid
from pathlib import Path

import psycopg
import pytest

from megaflow.core.states import TaskState
from megaflow.core.tasks import ErrorKind
from megaflow.storage.postgres import PostgresMetadataStore
from tests.fixtures.sql_servers import PostgresServer
from tests.reliability.conftest import LeakCheck
from tests.reliability.ledger import check_ledger, read_ledger
from tests.reliability.store_chaos import REPO, RunProcess, graded_job, until

pytestmark = [pytest.mark.slow, pytest.mark.services]
TTL_S = 4.0
LIMIT = 3
"""mini-SWE instances per arm."""


def _state(dsn: str, schema: str) -> tuple[str | None, int, float | None]:
    """(main run id, succeeded tasks, when its lease ends) as the drivers left them."""
    try:
        with psycopg.connect(dsn, connect_timeout=2) as conn:
            run = conn.execute(
                f"SELECT id FROM {schema}.runs WHERE id NOT LIKE '%%-control'"
            ).fetchone()
            if run is None:
                return None, 0, None
            done = conn.execute(
                f"SELECT count(*) FROM {schema}.tasks WHERE state = 'succeeded'"
            ).fetchone()
            lease = conn.execute(
                f"SELECT expires_at FROM {schema}.leases WHERE run_id = %s", (run[0],)
            ).fetchone()
    except psycopg.Error:  # the schema is not there yet
        return None, 0, None
    return str(run[0]), int(done[0]) if done else 0, None if lease is None else float(lease[0])


async def test_a_second_driver_is_refused_and_a_dead_ones_lease_ends(
    tmp_path: Path, leaks: LeakCheck, postgres_server: PostgresServer
) -> None:
    dsn, schema = postgres_server.dsn, f"lease_{uuid.uuid4().hex[:10]}"
    storage = {
        "metadata": {"type": "postgres", "dsn": dsn, "db_schema": schema},
        "outage": {"deadline_s": 30, "lease_ttl_s": TTL_S, "spool_dir": str(tmp_path / "spool")},
    }
    tasks = {"type": "swebench", "path": str(REPO / "tasks/mini-swe"), "limit": LIMIT}
    cfg = graded_job(tmp_path, storage, tasks=tasks)
    first = RunProcess(tmp_path, cfg)
    try:
        leaks.watch(first.proc.pid)
        until(lambda: _state(dsn, schema)[1] >= 1, "a task finished", 120, first)
        run_id = _state(dsn, schema)[0]
        assert run_id is not None
        second = RunProcess(
            tmp_path, None, "--resume", run_id, "--config", str(tmp_path / "run.yaml")
        )
        try:
            code = second.wait(60)
        finally:
            second.kill()
        out = second.output
        first.alive()  # the first driver was not disturbed
        assert code == 2, out[-3000:]
        assert f"run {run_id} is driven by another process" in out, out[-3000:]
        assert f"{socket.gethostname()}:{first.proc.pid}:" in out, out[-3000:]
        assert "its lease ends at" in out, out[-3000:]
        assert "Traceback" not in out, out[-3000:]
        _, done_before, _ = _state(dsn, schema)
        first.kill()  # SIGKILL, mid-run: the lease stays until it ends
    finally:
        first.kill()
    _, done_at_kill, ends = _state(dsn, schema)
    assert ends is not None, "the killed driver left no lease"
    assert done_at_kill < 2 * LIMIT, "the run finished before the kill; nothing to resume"
    # On this host a dead driver is seen dead and taken over at once (dead_here). A
    # driver on another machine cannot be seen: make the lease that one's, renewed
    # just before it died, so that only its end frees the run.
    elsewhere, ends = f"other-host.invalid:{first.proc.pid}:0000", time.time() + 12
    with psycopg.connect(dsn) as conn:
        conn.execute(f"UPDATE {schema}.leases SET owner = %s, expires_at = %s", (elsewhere, ends))
    early = RunProcess(tmp_path, None, "--resume", run_id, "--config", str(tmp_path / "run.yaml"))
    try:
        code = early.wait(60)
    finally:
        early.kill()
    assert time.time() < ends, "too slow to try before the lease ended"
    assert code == 2, early.output[-3000:]
    assert f"driven by another process ({elsewhere})" in early.output, early.output[-3000:]
    while time.time() <= ends:
        time.sleep(0.1)
    resumed = RunProcess(tmp_path, None, "--resume", run_id, "--config", str(tmp_path / "run.yaml"))
    try:
        leaks.watch(resumed.proc.pid)
        code = resumed.wait(120)
    finally:
        resumed.kill()
    assert code == 0, resumed.output[-4000:]
    assert "Traceback" not in resumed.output, resumed.output[-4000:]
    assert done_before >= 1
    async with PostgresMetadataStore(dsn, schema=schema) as md:
        assert await md.get_lease(run_id) is None, "the resumed driver did not release its lease"
        for run in await md.list_runs():
            control = run.id.endswith("-control")
            led = await read_ledger(md, run.id)
            check_ledger(led, LIMIT)
            assert led.states == {TaskState.SUCCEEDED: LIMIT}, (run.id, led.states)
            for tid, res in led.results.items():
                assert res.reward == (0.0 if control else 1.0), (tid, res)
                kinds = [a.error_kind for a in led.attempts[tid]]
                # once, or the attempt in flight at the kill (lost) and one more
                assert kinds[:-1] in ([], [ErrorKind.INFRA_LOST]), (tid, kinds)

"""SIGKILL of the embedded ``megaflow run`` process mid-run, then ``--resume``.

The run's tasks each take a while (the model makes the agent run ``sleep 1``
in its local sandbox). Once some tasks are done and others are in flight,
the whole ``megaflow run`` process group is SIGKILLed. Then
``megaflow run --resume RUN_ID`` finishes the run. Checked: every task ends
SUCCEEDED exactly once with one result; tasks that were terminal before the
kill were not run again (same attempts, same result); each task that was in
flight has its lost attempt recorded as ``infra_lost`` and then one more;
the killed process's sandboxes, cgroups and directories are reaped by the
resumed run (the ``leaks`` fixture watches both processes).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from megaflow.core.states import ACTIVE_STATES, TaskState
from megaflow.core.tasks import ErrorKind
from tests.reliability.conftest import LeakCheck
from tests.reliability.jobs import inline_job, openai_model
from tests.reliability.ledger import check_ledger, integrity_check, ledger_of
from tests.reliability.openai_server import flaky_openai, step_of

N = 10
CLI = [sys.executable, "-m", "megaflow.cli.main"]


def peek(db: Path) -> tuple[str | None, int, int]:
    """(run id, succeeded tasks, tasks in flight) as the running process left them."""
    if not db.exists():
        return None, 0, 0
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT id FROM runs").fetchone()
        states = dict(conn.execute("SELECT state, count(*) FROM tasks GROUP BY state").fetchall())
    except sqlite3.OperationalError:  # the schema is not there yet
        return None, 0, 0
    finally:
        conn.close()
    active = sum(int(states.get(s.value, 0)) for s in ACTIVE_STATES)
    return (None if row is None else str(row[0])), int(states.get("succeeded", 0)), active


@pytest.mark.slow
async def test_sigkill_run_then_resume(tmp_path: Path, leaks: LeakCheck) -> None:
    db = tmp_path / "m.db"
    env = {**os.environ, "COLUMNS": "200", "OPENAI_API_KEY": "unused"}
    with flaky_openai(lambda n, body: "nap" if step_of(body) == 0 else "ok") as server:
        cfg = inline_job(tmp_path, openai_model(server.base_url), n=N)
        path = tmp_path / "run.yaml"
        path.write_text(yaml.safe_dump(cfg))
        proc = subprocess.Popen(
            [*CLI, "run", str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env=env, start_new_session=True,
        )  # fmt: skip
        try:
            leaks.watch(proc.pid)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                _, succeeded, active = peek(db)
                if succeeded >= 3 and active >= 1:
                    break
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.05)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        run_id, _, _ = peek(db)
        assert run_id is not None
        before = await ledger_of(db, run_id)
        assert integrity_check(db) == "ok"  # a SIGKILL does not corrupt the store
        in_flight = {t for t, r in before.tasks.items() if r.state.active}
        done = {t for t, r in before.tasks.items() if r.state.terminal}
        assert done, "nothing finished before the kill"
        assert in_flight, "nothing was in flight at the kill"
        assert len(done) < N, "the run finished before the kill"

        resumed = subprocess.Popen(
            [*CLI, "run", "--resume", run_id, "--db", str(db)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        )  # fmt: skip
        leaks.watch(resumed.pid)
        out, _ = resumed.communicate(timeout=300)
        assert resumed.returncode == 0, out

    after = await ledger_of(db, run_id)
    check_ledger(after, N)
    assert after.states == {TaskState.SUCCEEDED: N}
    for tid in done:  # terminal tasks were not run again
        assert after.attempts[tid] == before.attempts[tid]
        assert after.results[tid] == before.results[tid]
    for tid in in_flight:  # the lost attempt is recorded, then one more ran
        kinds = [a.error_kind for a in after.attempts[tid]]
        assert kinds[-2:] == [ErrorKind.INFRA_LOST, None], (tid, kinds)
    assert integrity_check(db) == "ok"

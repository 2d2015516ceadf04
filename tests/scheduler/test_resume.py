"""A control plane SIGKILLed mid-run and restarted with resume finishes the run:
terminal tasks are not run again, in-flight ones are retried once with the lost
attempt recorded as infra-lost, and no task is lost or counted twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from megaflow.core.states import ACTIVE_STATES, TaskState
from megaflow.core.tasks import ErrorKind
from megaflow.storage.sqlite import SqliteMetadataStore

WORKER = Path(__file__).with_name("resume_worker.py")
N = 40


async def snapshot(db: Path) -> dict[str, tuple[TaskState, int]]:
    async with SqliteMetadataStore(db) as md:
        return {r.id: (r.state, r.attempts) for r in await md.list_tasks("resume-run")}


@pytest.mark.slow
async def test_resume_after_sigkill_finishes_the_run(tmp_path: Path) -> None:
    db, log = tmp_path / "m.db", tmp_path / "ran.log"
    cmd = [sys.executable, str(WORKER)]
    proc = subprocess.Popen([*cmd, "start", str(db), str(log), str(N)], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"submitted"
        before: dict[str, tuple[TaskState, int]] = {}
        for _ in range(600):
            time.sleep(0.05)
            if db.exists():
                before = await snapshot(db)
                done = sum(1 for s, _ in before.values() if s is TaskState.SUCCEEDED)
                if done >= 8:
                    break
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    before = await snapshot(db)
    terminal = {t for t, (s, _) in before.items() if s.terminal}
    in_flight = {t: a for t, (s, a) in before.items() if s in ACTIVE_STATES}
    assert 8 <= len(terminal) < N
    assert in_flight, "the kill should catch some tasks mid-attempt"
    ran_before = log.read_text().split()
    log.write_text("")

    out = subprocess.run(
        [*cmd, "resume", str(db), str(log)], capture_output=True, text=True, timeout=120,
        check=True,
    )  # fmt: skip
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"succeeded": N}
    ran_after = log.read_text().split()
    assert not terminal & set(ran_after), "terminal tasks ran again"
    assert len(ran_after) == len(set(ran_after))
    assert set(ran_after) | terminal == {f"t{i:03d}" for i in range(N)}
    assert set(ran_before) >= terminal

    async with SqliteMetadataStore(db) as md:
        results = await md.list_results("resume-run")
        assert len(results) == N
        assert len({r.task_id for r in results}) == N
        for tid, attempts in in_flight.items():
            rec = await md.get_task(tid)
            assert rec.state is TaskState.SUCCEEDED
            assert rec.attempts == attempts + 1
            kinds = [a.error_kind for a in await md.list_attempts(tid)]
            assert kinds == [ErrorKind.INFRA_LOST, None], (tid, kinds)
        for tid in terminal:
            assert (await md.get_task(tid)).attempts == before[tid][1]
    assert os.path.exists(db)

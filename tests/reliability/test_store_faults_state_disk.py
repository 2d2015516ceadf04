"""The whole state folder full under an embedded ``megaflow run``, freed later.

SQLite, artifacts and sandbox workspaces all live on one small tmpfs. Once a
task has finished, the tmpfs is filled to the last byte and freed 10 s
later. Checked: new tasks are held while the disk is below
``storage.outage.min_free_mb`` and the run says so; metadata and artifact
writes wait the full disk out; a sandbox that meets the full disk (its
patch cannot be taken: git cannot write) is an infrastructure failure,
retried, never a graded sample; the run exits by itself with 0, no
traceback; every gold sample SUCCEEDED with reward 1.0, every control sample
with 0; the books are consistent and every attempt before a task's last is
an infrastructure one.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from megaflow.core.states import TaskState
from megaflow.core.tasks import ErrorKind
from megaflow.storage.sqlite import SqliteMetadataStore
from tests.reliability.conftest import LeakCheck
from tests.reliability.ledger import check_ledger, integrity_check, read_ledger
from tests.reliability.store_chaos import (
    LIMIT,
    RunProcess,
    fill,
    graded_job,
    sqlite_succeeded,
    tmpfs,
    until,
)

pytestmark = [pytest.mark.slow]
FULL_S = 10.0


async def test_full_state_disk_holds_and_waits(tmp_path: Path, leaks: LeakCheck) -> None:
    with tmpfs(tmp_path / "state", "160m") as disk:
        db = disk / "m.db"
        cfg = graded_job(
            disk,
            {
                "metadata": {"type": "sqlite", "path": str(db)},
                "artifacts": {"type": "local", "root": str(disk / "art")},
                "outage": {"deadline_s": 90, "backoff_max_s": 1.0, "min_free_mb": 8},
            },
        )
        run = RunProcess(tmp_path, cfg)
        try:
            leaks.watch(run.proc.pid)
            until(lambda: sqlite_succeeded(db) >= 1, "a task finished", 90, run)
            filler = fill(disk)
            time.sleep(FULL_S)
            filler.unlink()
            code = run.wait(150)
        finally:
            run.kill()
        out = run.output
        async with SqliteMetadataStore(db) as md:  # the books first: they say what went wrong
            runs = await md.list_runs()
            for r in runs:
                control = r.id.endswith("-control")
                led = await read_ledger(md, r.id)
                check_ledger(led, LIMIT)
                assert led.states == {TaskState.SUCCEEDED: LIMIT}, (r.id, led.states)
                for tid, res in led.results.items():
                    assert res.reward == (0.0 if control else 1.0), (tid, res)
                    assert res.error_kind is None, (tid, res)
                    earlier = led.attempts[tid][:-1]
                    assert all(a.error_kind is ErrorKind.INFRA for a in earlier), earlier
        assert integrity_check(db) == "ok"
    assert code == 0, out[-4000:]
    assert "holding new tasks" in out, out[-3000:]
    assert "Traceback" not in out, out[-4000:]

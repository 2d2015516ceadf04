"""A full artifact disk under an embedded ``megaflow run``, freed again later.

The run's artifact root is a small tmpfs. Once a task has finished, the
tmpfs is filled to the last byte (a real ``ENOSPC`` for every write) and
freed 10 s later. Checked: artifact writes wait the full disk out instead of
failing graded samples; the run exits by itself with 0, no traceback; every
gold sample SUCCEEDED with reward 1.0, every control sample with 0, each
task with one attempt; every artifact a result names reads back whole.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from megaflow.storage.local_artifacts import LocalArtifactStore
from megaflow.storage.sqlite import SqliteMetadataStore
from tests.reliability.conftest import LeakCheck
from tests.reliability.ledger import integrity_check
from tests.reliability.store_chaos import (
    RunProcess,
    check_graded_books,
    fill,
    graded_job,
    sqlite_succeeded,
    tmpfs,
    until,
)

pytestmark = [pytest.mark.slow]
FULL_S = 10.0


async def test_full_artifact_disk_is_waited_out(tmp_path: Path, leaks: LeakCheck) -> None:
    with tmpfs(tmp_path / "art", "32m") as disk:
        storage = {
            "artifacts": {"type": "local", "root": str(disk)},
            # this test is about the store's retries, not about holding new tasks
            "outage": {"deadline_s": 90, "backoff_max_s": 1.0, "min_free_mb": 0},
        }
        run = RunProcess(tmp_path, graded_job(tmp_path, storage))
        try:
            leaks.watch(run.proc.pid)
            until(lambda: sqlite_succeeded(tmp_path / "m.db") >= 1, "a task finished", 90, run)
            filler = fill(disk)
            time.sleep(FULL_S)
            filler.unlink()
            code = run.wait(120)
        finally:
            run.kill()
        assert code == 0, run.output[-4000:]
        async with SqliteMetadataStore(tmp_path / "m.db") as md:
            await check_graded_books(md, run.output)
            keys = [k for r in await md.list_runs() for res in await md.list_results(r.id)
                    for k in res.artifacts.values()]  # fmt: skip
        async with LocalArtifactStore(disk) as store:
            for key in keys:  # whole and matching its checksum
                await store.get(key)
    out = run.output
    assert "No space left on device" in out, out[-3000:]  # the full disk was met ...
    assert "is back after" in out, out[-3000:]  # ... and waited out
    assert integrity_check(tmp_path / "m.db") == "ok"

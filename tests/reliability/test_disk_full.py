"""A full disk under the artifact store.

The artifacts root is a 1 MiB tmpfs; each task's trajectory holds a large
command output, so the disk fills after a few tasks. Checked:

- the tasks whose artifacts no longer fit end FAILED with the store's error
  (``StorageError``: "No space left on device"), not retried, and the run
  finishes: the tasks that did fit are SUCCEEDED with readable artifacts;
- the SQLite metadata store (on another disk) passes ``PRAGMA integrity_check``;
- no half-written artifact is readable as valid: every stored key either
  reads back matching its checksum or is refused, and no temporary file is
  left behind.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from megaflow.app.job import Job
from megaflow.config import parse_config
from megaflow.core.errors import ChecksumMismatch, NotFound
from megaflow.core.states import TaskState
from tests.reliability.jobs import inline_job, openai_model
from tests.reliability.ledger import check_ledger, integrity_check, read_ledger
from tests.reliability.openai_server import flaky_openai, step_of

BIG = "head -c 150000 /dev/zero | tr '\\0' x"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs, unmounted afterwards (mounting needs root, as CI has)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    root = tmp_path / "art"
    root.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(root)], check=True)
    try:
        yield root
    finally:
        subprocess.run(["umount", str(root)], check=True)


def big_output(n: int, body: dict[str, Any]) -> str:
    return "big" if step_of(body) == 0 else "ok"


async def test_full_artifact_disk_fails_tasks_cleanly(tmp_path: Path, small_disk: Path) -> None:
    with flaky_openai(big_output, big_command=BIG) as server:
        cfg = inline_job(tmp_path, openai_model(server.base_url), n=10)
        cfg["agent"]["max_observation_chars"] = 200_000
        cfg["storage"]["artifacts"]["root"] = str(small_disk)
        async with Job(parse_config(cfg)) as job:
            await job.submit()
            counts = (await job.wait())[job.run_id]
            led = await read_ledger(job.stores.metadata, job.run_id)
            store = job.stores.artifacts
            valid, refused = [], []
            for key in await store.list():
                try:
                    await store.get(key)
                    valid.append(key)
                except (ChecksumMismatch, NotFound):
                    refused.append(key)
            referenced = [k for r in led.results.values() for k in r.artifacts.values()]
            for key in referenced:  # every artifact a result points to is whole
                await store.get(key)

    check_ledger(led, 10)
    assert counts.get(TaskState.SUCCEEDED, 0) >= 1, counts
    assert counts.get(TaskState.FAILED, 0) >= 1, counts
    assert set(counts) <= {TaskState.SUCCEEDED, TaskState.FAILED}
    for tid, rec in led.tasks.items():
        if rec.state is TaskState.FAILED:
            err = led.results[tid].error or ""
            assert "StorageError" in err, err
            assert "No space left on device" in err, err
            assert len(led.attempts[tid]) == 1  # a full disk is not retried
        else:
            assert led.results[tid].success
    assert integrity_check(tmp_path / "m.db") == "ok"
    assert set(referenced) <= set(valid)
    assert not refused, f"artifacts listed but not valid: {refused}"
    assert not list(small_disk.rglob(".tmp-*")), "temporary files left behind"

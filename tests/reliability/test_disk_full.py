"""A full disk under the artifact store that is not freed.

The artifacts root is a 1 MiB tmpfs; each task's trajectory holds a large
command output, so the disk fills after a few tasks and stays full. Checked:

- no task is failed because of the disk: the writes wait (storage.outage),
  and once the outage deadline (3 s here) passes the run stops with one
  ``StoreUnavailable`` naming the artifacts store and how to resume; the
  tasks that fit are SUCCEEDED with readable artifacts, the others are not
  terminal (in flight or queued, for ``--resume``);
- the SQLite metadata store (on another disk) passes ``PRAGMA integrity_check``;
- no half-written artifact is readable as valid: every stored key either
  reads back matching its checksum or is refused, and no temporary file is
  left behind.

``test_store_faults_disk.py`` frees the disk again and checks the run finishes.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from megaflow.app.job import Job
from megaflow.config import parse_config
from megaflow.core.errors import ChecksumMismatch, NotFound, StoreUnavailable
from megaflow.core.states import TaskState
from megaflow.storage.local_artifacts import LocalArtifactStore
from megaflow.storage.sqlite import SqliteMetadataStore
from tests.reliability.jobs import inline_job, openai_model
from tests.reliability.ledger import integrity_check, read_ledger
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


async def test_full_artifact_disk_stops_the_run_cleanly(tmp_path: Path, small_disk: Path) -> None:
    with flaky_openai(big_output, big_command=BIG) as server:
        cfg = inline_job(tmp_path, openai_model(server.base_url), n=10)
        cfg["agent"]["max_observation_chars"] = 200_000
        cfg["storage"]["artifacts"]["root"] = str(small_disk)
        cfg["storage"]["outage"] = {"deadline_s": 3, "backoff_max_s": 0.5, "min_free_mb": 0}
        async with Job(parse_config(cfg)) as job:
            await job.submit()
            t0 = time.monotonic()
            with pytest.raises(StoreUnavailable) as stopped:
                await job.wait()
            stopped_s = time.monotonic() - t0
        # the books, as the stopped run left them, and the store read back afresh
        async with SqliteMetadataStore(tmp_path / "m.db") as md:
            led = await read_ledger(md, job.run_id)
        async with LocalArtifactStore(small_disk) as store:
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

    message = str(stopped.value)
    assert stopped.value.store == "artifacts", message
    assert "No space left on device" in message, message
    assert f"megaflow run --resume {job.run_id}" in message, message
    assert stopped_s < 60, stopped_s
    states = led.states
    assert states.get(TaskState.SUCCEEDED, 0) >= 1, states
    assert TaskState.FAILED not in states, states  # a full disk fails no task
    for tid, rec in led.tasks.items():
        if rec.state is TaskState.SUCCEEDED:
            assert led.results[tid].success
        else:
            assert not rec.state.terminal, (tid, rec.state)
            assert tid not in led.results
    assert integrity_check(tmp_path / "m.db") == "ok"
    assert set(referenced) <= set(valid)
    assert not refused, f"artifacts listed but not valid: {refused}"
    assert not list(small_disk.rglob(".tmp-*")), "temporary files left behind"

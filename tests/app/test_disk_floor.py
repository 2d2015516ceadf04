"""A full host disk is the host's fault: new attempts wait for space, and a
sample spoiled while the host's disk was full is an infrastructure failure."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from megaflow.app.attempt import AgentExecutor
from megaflow.app.disk_floor import DiskFloor, disk_error
from megaflow.core.errors import SandboxError

OUT_OF_SPACE = "cannot take the agent's patch: fatal: Out of diskspace"


def test_disk_errors_are_recognised() -> None:
    assert disk_error(OUT_OF_SPACE)
    assert disk_error("write error: No space left on device")
    assert not disk_error("cannot take the agent's patch: not a git repository")
    assert not disk_error(None)


def test_a_folder_below_the_floor_is_short(tmp_path: Path) -> None:
    assert DiskFloor([tmp_path], 0).short() is None  # 0: never
    huge = DiskFloor([tmp_path / "not-made-yet"], 1 << 40)  # a petabyte: always short
    low = huge.short()
    assert low is not None
    assert low[0] == tmp_path / "not-made-yet"


async def test_new_attempts_wait_for_space_and_the_run_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    floor = DiskFloor([tmp_path], 1 << 40, poll_s=0.01)
    caplog.set_level(logging.WARNING, "megaflow.app.disk_floor")
    waiting = asyncio.ensure_future(floor.room("task-1"))
    await asyncio.sleep(0.1)
    assert not waiting.done()  # held, not failed
    assert "holding new tasks (task-1 first)" in caplog.text
    floor.floor = 0  # space is back
    await asyncio.wait_for(waiting, 1)
    assert floor.held == 1
    assert "disk space is back" in caplog.text


def _executor(disk: DiskFloor) -> AgentExecutor:
    unused: Any = None
    return AgentExecutor(unused, {}, unused, unused, disk=disk)


def test_a_sample_spoiled_while_the_host_disk_was_full_is_infrastructure(
    tmp_path: Path,
) -> None:
    since = time.monotonic()
    with pytest.raises(SandboxError, match="the host's disk was full during the attempt"):
        _executor(DiskFloor([tmp_path], 1 << 40))._host_disk_check(since, f"{OUT_OF_SPACE}; ")


async def test_a_disk_full_only_for_a_while_during_the_attempt_still_counts(
    tmp_path: Path,
) -> None:
    floor = DiskFloor([tmp_path], 1 << 40, poll_s=0.01)
    since = time.monotonic()
    await floor.start()
    try:
        await asyncio.sleep(0.05)  # the watcher sees the folder short ...
        floor.floor = 0  # ... then space is back before the attempt ends
        assert floor.short() is None
        with pytest.raises(SandboxError, match="was full during the attempt"):
            _executor(floor)._host_disk_check(since, "")
        # an attempt that began after the disk had room again is the agent's own
        _executor(floor)._host_disk_check(time.monotonic() + 1, "")
    finally:
        await floor.stop()


def test_with_room_on_the_host_the_sample_stays_the_agent_s(tmp_path: Path) -> None:
    # the host has room: a sandbox's own disk limit was hit, by the agent
    _executor(DiskFloor([tmp_path], 0))._host_disk_check(time.monotonic(), f"{OUT_OF_SPACE}; ")


async def test_the_cluster_agent_service_holds_attempts_on_its_own_full_disk(
    tmp_path: Path,
) -> None:
    """The Agent service of a cluster watches its local store folders as the
    embedded job does, and every run's executor waits on that watch."""
    from megaflow.app.agent_runs import ClusterAgentExecutor
    from megaflow.config.loader import load_config
    from megaflow.core.tasks import RunSpec
    from megaflow.rpc.config import ClusterConfig

    storage = {
        "metadata": {"type": "sqlite", "path": str(tmp_path / "db" / "m.db")},
        "artifacts": {"type": "local", "root": str(tmp_path / "artifacts")},
        "outage": {"min_free_mb": 1 << 30},  # a petabyte: always short
    }
    cfg = ClusterConfig.model_validate({"scheduler": {"storage": storage}})
    service = ClusterAgentExecutor.from_cluster(cfg, "token")
    disk = service.disk
    assert disk is not None
    assert disk.folders == sorted([tmp_path / "db", tmp_path / "artifacts"])
    run_config = load_config("examples/quickstart.yaml").model_dump(mode="json")
    await service.stores.start()
    try:
        await service.stores.metadata.create_run(RunSpec(id="run-1", config=run_config))
        parts = await service._parts("run-1")
        assert parts.executor.disk is disk  # each run's attempts wait on the service's watch
        await parts.pool.stop()
        await parts.arm.model.stop()
    finally:
        await service.stores.stop()
    disk.poll_s = 0.01
    waiting = asyncio.ensure_future(disk.room("task-1"))
    await asyncio.sleep(0.1)
    assert not waiting.done()  # the attempt is held, not failed
    disk.floor = 0
    await asyncio.wait_for(waiting, 1)

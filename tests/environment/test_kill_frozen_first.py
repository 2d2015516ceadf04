"""A sandbox's processes are killed with none of them running in between.

Killed by pid one at a time in a group that is not frozen, a parent sees its
child die and acts before its own turn comes: the exec server answers for the
agent's command ("killed", exit -9) instead of the sandbox being lost, and the
attempt is graded on that answer (seen in CI as an attempt with neither
result nor error where the host had ended the sandbox). On cgroup v1 only the
freezer hierarchy can freeze, and it sorts after ``cpu``; so
:meth:`SandboxCgroup.kill_all` goes through the freezing group first.

The attacker here is the order and the pace of the kills: latest pid first
(the command before the server that started it), 0.3 s apart, so the race is
lost every time the processes run between kills.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from megaflow.core.errors import SandboxError
from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.config import LocalRuntimeConfig
from megaflow.environment.local import LocalRuntime, freezer
from megaflow.environment.local.sandbox import LocalSandbox


def slow_latest_first(group: Path, keep: set[int]) -> int:
    """:func:`freezer.kill_frozen` at its worst: children before parents, slowly."""
    killed = 0
    for pid in sorted(freezer.members(group) - keep, reverse=True):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
        killed += 1
        time.sleep(0.3)
    return killed


@pytest.fixture
async def sandbox(tmp_path: Path) -> AsyncIterator[LocalSandbox]:
    runtime = LocalRuntime(LocalRuntimeConfig(root=str(tmp_path / "sb")))
    await runtime.start()
    box = await runtime.create(EnvironmentSpec(ttl_s=600), owner="t")
    try:
        assert isinstance(box, LocalSandbox)
        if box.cgroup is None or box.cgroup.freeze_dir is None:
            pytest.skip("needs a sandbox in cgroups with a freezer")
        yield box
    finally:
        await runtime.destroy(box.id)
        await runtime.stop()


async def test_no_process_answers_for_its_command_while_the_sandbox_is_killed(
    sandbox: LocalSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(freezer, "kill_frozen", slow_latest_first)
    call = asyncio.ensure_future(sandbox.exec("sleep 60", timeout=120))
    await asyncio.sleep(1.0)
    assert not call.done()
    cgroup = sandbox.cgroup
    assert cgroup is not None
    await asyncio.to_thread(cgroup.kill_all)
    # an answer here (exit 137, "Killed") is the race lost: the server outlived its command
    with pytest.raises(SandboxError, match=r"exited|exec server is gone"):
        await asyncio.wait_for(call, 30)

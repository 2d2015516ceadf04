"""A sandbox process killed from outside while its task runs.

The first model answer makes the agent run ``sleep 60`` in its sandbox; the
test then SIGKILLs either the sandbox's bubblewrap process or the exec server
inside it. The exec fails with ``SandboxError`` (infrastructure), the attempt
is recorded as ``infra`` and retried in a fresh sandbox, the run finishes,
and the broken sandbox is torn down (the ``leaks`` fixture checks processes,
cgroups, mounts and directories).
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from megaflow.app.job import Job
from megaflow.config import parse_config
from megaflow.core.states import TaskState
from megaflow.core.tasks import ErrorKind
from megaflow.environment.local.records import SandboxRecord
from tests.environment.conftest import descendants
from tests.reliability.jobs import inline_job, openai_model
from tests.reliability.ledger import check_ledger, integrity_check, read_ledger
from tests.reliability.openai_server import flaky_openai


def sleeping_sandbox(root: Path) -> SandboxRecord | None:
    """The record of the sandbox whose command ``sleep`` is running, if any."""
    for box in root.glob("boxes/*"):
        rec = SandboxRecord.load(box)
        if (
            rec is not None
            and rec.bwrap_pid is not None
            and ("sleep" in descendants(rec.bwrap_pid).values())
        ):
            return rec
    return None


async def wait_for_sleeper(root: Path) -> SandboxRecord:
    for _ in range(600):
        rec = sleeping_sandbox(root)
        if rec is not None:
            return rec
        await asyncio.sleep(0.05)
    raise AssertionError("no sandbox started the sleep command")


@pytest.mark.parametrize("victim", ["bwrap", "exec-server"])
async def test_killed_sandbox_is_an_infra_failure_and_retried(victim: str, tmp_path: Path) -> None:
    with flaky_openai(lambda n, body: "sleep" if n == 1 else "ok") as server:
        cfg = parse_config(inline_job(tmp_path, openai_model(server.base_url), max_attempts=3))
        async with Job(cfg) as job:
            await job.submit()
            rec = await wait_for_sleeper(tmp_path / "sb")
            assert rec.bwrap_pid is not None
            if victim == "bwrap":
                pid = rec.bwrap_pid
            else:
                pid = min(p for p, name in descendants(rec.bwrap_pid).items() if name == "python3")
            os.kill(pid, signal.SIGKILL)
            counts = await asyncio.wait_for(job.wait(), 120)
            led = await read_ledger(job.stores.metadata, job.run_id)

    assert counts[job.run_id] == {TaskState.SUCCEEDED: 1}
    check_ledger(led, 1)
    ((tid, attempts),) = led.attempts.items()
    assert [a.error_kind for a in attempts] == [ErrorKind.INFRA, None]
    assert "sandbox" in (attempts[0].error or ""), attempts[0].error
    assert led.results[tid].success
    # the killed sandbox is gone: its bubblewrap process and its directory
    assert not (tmp_path / "sb" / "boxes" / rec.id).exists()
    assert rec.bwrap_pid not in descendants(os.getpid())
    assert integrity_check(tmp_path / "m.db") == "ok"

"""How the local runtime starts many sandboxes: admission, and how bubblewrap is watched."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from pathlib import Path
from typing import Any

from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.local import LocalRuntime
from tests.environment.conftest import local_runtime


async def test_at_most_max_starting_sandboxes_start_at_once(tmp_path: Path) -> None:
    rt = local_runtime(tmp_path, max_starting=2)
    await rt.start()
    launch = rt._launch
    now = peak = 0

    async def counted(*args: Any) -> None:
        nonlocal now, peak
        now += 1
        peak = max(peak, now)
        try:
            await launch(*args)
        finally:
            now -= 1

    rt._launch = counted  # type: ignore[method-assign,assignment]
    try:
        boxes = await asyncio.gather(*(rt.create(EnvironmentSpec()) for _ in range(5)))
        assert peak == 2
        outs = await asyncio.gather(*(sb.exec("echo ok") for sb in boxes))
        assert [r.stdout for r in outs] == ["ok\n"] * 5
    finally:
        await rt.stop()


async def test_no_thread_per_sandbox_and_a_killed_bubblewrap_is_reaped(local: LocalRuntime) -> None:
    before = threading.active_count()
    boxes = [await local.create(EnvironmentSpec()) for _ in range(6)]
    # No thread per sandbox: at most the thread pool's workers, of which a
    # busy machine may start a second when one hop is handed out before the
    # last one's worker is idle again.
    assert threading.active_count() <= before + 2
    victim = boxes[0]
    assert victim.proc is not None
    os.kill(victim.proc.pid, signal.SIGKILL)
    assert await asyncio.wait_for(victim.proc.wait(), 10) == -signal.SIGKILL
    assert victim.proc.returncode == -signal.SIGKILL
    for sb in boxes:
        await sb.destroy()
    assert all(sb.proc is not None and sb.proc.returncode is not None for sb in boxes)
    assert local.sandboxes == {}


async def test_a_start_cancelled_at_any_point_leaves_nothing(local: LocalRuntime) -> None:
    """Cancelled while bubblewrap is being spawned, mapped or greeted: the leak
    check around every test finds no process, cgroup, mount or directory left."""
    for delay in (0.0, 0.001, 0.003, 0.01, 0.03):
        task = asyncio.ensure_future(local.create(EnvironmentSpec()))
        await asyncio.sleep(delay)
        task.cancel()
        try:
            sb = await task
        except asyncio.CancelledError:
            continue
        await sb.destroy()  # it was ready before the cancel arrived
    assert local.sandboxes == {}

"""The agent's patch is taken only after every process it left running is dead.

The attack: before it stops, the agent leaves a watcher behind that does
nothing until the sandbox starts a new process (as taking the patch does) and
then keeps writing the fix into ``calc.py``. A watcher alive while the patch is
taken would put a change in it that the agent never made while it ran; with
the kill first, the watcher is gone before anything starts.
"""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path

from megaflow.core.errors import NotFound
from megaflow.datasets import environment_spec, extract_patch, load_instances, prepare_sandbox
from megaflow.datasets.instance import SWEInstance
from megaflow.environment.abstract import Sandbox
from megaflow.environment.local import LocalRuntime
from tests.datasets.conftest import CALC, CALC_FIXED, make_calc_repo, write_jsonl
from tests.environment.conftest import leak_check, local

__all__ = ["leak_check", "local"]

READY = "/tmp/.watcher-ready"
# Waits (polling /proc, starting no process itself) until any process appears that
# was not there when it began, then rewrites calc.py with the fix every millisecond
# for 5 s, through a rename so that a reader never sees half a file.
WATCHER = f"""
import os, sys, time
def pids():
    return {{p for p in os.listdir("/proc") if p.isdigit()}}
before = pids()
open({READY!r}, "w").close()
while not pids() - before:
    time.sleep(0.001)
end = time.monotonic() + 5
while time.monotonic() < end:
    with open("/workspace/.git/fix.tmp", "w") as f:
        f.write(sys.argv[1])
    os.replace("/workspace/.git/fix.tmp", "/workspace/calc.py")
    time.sleep(0.001)
"""


def _calc_instance(tmp_path: Path) -> SWEInstance:
    _, inst = make_calc_repo(tmp_path)
    (loaded,) = load_instances(write_jsonl(tmp_path / "s.jsonl", [inst]))
    return loaded


async def _leave_watcher(box: Sandbox) -> None:
    """Start the watcher in the background, as the agent, and wait until it watches."""
    argv = f"python3 -c {shlex.quote(WATCHER)} {shlex.quote(CALC_FIXED)}"
    started = await box.exec(f"setsid {argv} >/dev/null 2>&1 </dev/null &", cwd="/workspace")
    assert started.exit_code == 0, started
    for _ in range(1000):
        try:
            await box.read_file(READY)  # the exec server reads it: no new process
            return
        except NotFound:
            await asyncio.sleep(0.01)
    raise AssertionError("the watcher never started")


async def test_the_watcher_writes_the_fix_once_any_process_starts(
    local: LocalRuntime, tmp_path: Path
) -> None:
    """The attack works where nothing kills it: a process started after the
    watcher (here a short ``sleep``: a spawned ``true`` is gone within a
    millisecond, between two looks of a watcher on a busy machine) sets it
    off, and the fix lands in the patch."""
    loaded = _calc_instance(tmp_path)
    async with await local.create(environment_spec(loaded)) as box:
        await prepare_sandbox(box, loaded)
        await _leave_watcher(box)
        assert await box.read_file("/workspace/calc.py") == CALC.encode()
        await box.exec("sleep 0.1")
        for _ in range(500):
            if await box.read_file("/workspace/calc.py") == CALC_FIXED.encode():
                break
            await asyncio.sleep(0.01)
        candidate = await extract_patch(box, loaded.base_commit)
    assert candidate.error is None
    assert b"+    return a + b" in candidate.patch


async def test_processes_the_agent_left_are_dead_before_its_patch_is_taken(
    local: LocalRuntime, tmp_path: Path
) -> None:
    loaded = _calc_instance(tmp_path)
    async with await local.create(environment_spec(loaded)) as box:
        await prepare_sandbox(box, loaded)
        await _leave_watcher(box)
        candidate = await extract_patch(box, loaded.base_commit)
        after = await box.read_file("/workspace/calc.py")
    assert candidate.error is None
    assert candidate.patch == b"", candidate.text  # the agent changed nothing itself
    assert after == CALC.encode()  # the watcher never got to write

"""A MegaFlow process SIGKILLed while a local sandbox starts leaves nothing.

A child process starts host-image sandboxes in a loop (create, then tear
down) with the real local runtime: bubblewrap, cgroups, the exec server.
Each round times a few of its starts, then SIGKILLs it at a random point of
the next one, uniformly across the whole start path (from the call to
``create`` until it returned, as timed). Then ``megaflow sandbox gc`` runs
for its root, and every trace of the killed process must be gone: no process
anywhere on the host carrying its marker (its process key in the command
line or the environment: the launcher, bubblewrap, the sandbox's init) nor
any descendant of one, which catches processes outside every cgroup and
reparented to PID 1; no cgroup named for it; no mount below the root or its
staging directory; no sandbox directory.

It runs with cgroups (the groups come first and the reaper ends a dead
maker's groups) and with ``cgroups: off`` (only the reaper's marker sweep
finds them). Each round prints how many marked processes the kill itself
left (half a second after it, before the gc) and what the gc left.
"""

from __future__ import annotations

import os
import random
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from megaflow.environment.local.userns import STAGE_ROOT
from tests.environment.conftest import CGROUP_ROOT, mounts
from tests.reliability.conftest import LeakCheck

ROUNDS = 10
WARM_STARTS = 3  # timed starts before the one that is killed
CLI = [sys.executable, "-m", "megaflow.cli.main"]
CHILD = """
import asyncio, sys, time
from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.config import LocalRuntimeConfig
from megaflow.environment.local import LocalRuntime

async def main(root: str, cgroups: str) -> None:
    rt = LocalRuntime(LocalRuntimeConfig(root=root, cgroups=cgroups, reap_interval_s=3600))
    await rt.start()
    spec = EnvironmentSpec(image="host")
    while True:
        print("start", flush=True)
        t0 = time.monotonic()
        sb = await rt.create(spec)
        print(f"ready {time.monotonic() - t0:.6f}", flush=True)
        await sb.teardown()

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


@dataclass
class Left:
    """What one killed process left after ``sandbox gc``."""

    processes: dict[int, str]  # pid -> command line
    cgroups: list[Path]
    mounts: set[str]
    boxes: list[Path]

    def empty(self) -> bool:
        return not (self.processes or self.cgroups or self.mounts or self.boxes)


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def marked_processes(marker: str) -> dict[int, str]:
    """Every process on the host whose command line or environment holds
    ``marker``, and every descendant of one (pid -> command line)."""
    needle = marker.encode()
    parents: dict[int, int] = {}
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        stat = _read(f"/proc/{pid}/stat")
        if not stat:
            continue
        parents[pid] = int(stat[stat.rindex(b")") + 2 :].split()[1])
        if needle in _read(f"/proc/{pid}/cmdline") or needle in _read(f"/proc/{pid}/environ"):
            found.add(pid)
    grew = True
    while grew:
        more = {pid for pid, ppid in parents.items() if ppid in found} - found
        found |= more
        grew = bool(more)
    return {
        pid: _read(f"/proc/{pid}/cmdline").replace(b"\0", b" ").decode(errors="replace")[:120]
        for pid in found
        if os.path.exists(f"/proc/{pid}")
    }


def left_by(key: str, root: Path) -> Left:
    return Left(
        processes=marked_processes(key),
        cgroups=[p for p in CGROUP_ROOT.glob(f"*/megaflow/{key}") if p.exists()],
        mounts=mounts(root) | mounts(STAGE_ROOT / key),
        boxes=list((root / "boxes").glob("*")),
    )


def one_round(
    tmp: Path, cgroups: str, rng: random.Random, leaks: LeakCheck
) -> tuple[float, int, Left]:
    """Start the child, time its starts, kill it during the next one, run
    ``sandbox gc``; return where in the start it was killed (0..1), how many
    marked processes the kill left, and what the gc left."""
    root = tmp / "local"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(root), cgroups], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert child.stdout is not None
    key = leaks.watch(child.pid)
    try:
        times: list[float] = []
        while len(times) < WARM_STARTS:
            line = child.stdout.readline()
            assert line, f"the child died: {child.stderr.read() if child.stderr else ''}"
            if line.startswith("ready "):
                times.append(float(line.split()[1]))
        line = child.stdout.readline()
        assert line == "start\n", line
        at = rng.random()
        time.sleep(at * statistics.median(times))
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    time.sleep(0.5)  # what the parent-death signals take goes meanwhile
    after_kill = len(marked_processes(key))
    gc = subprocess.run(
        [*CLI, "sandbox", "gc", "--root", str(root)], capture_output=True, text=True, timeout=120
    )
    assert gc.returncode == 0, gc.stderr
    time.sleep(0.2)  # a process the gc killed is gone from /proc once its parent reaped it
    return at, after_kill, left_by(key, root)


@pytest.mark.slow
@pytest.mark.parametrize("cgroups", ["auto", "off"])
def test_kill_during_sandbox_start_leaks_nothing(
    cgroups: str, tmp_path: Path, leaks: LeakCheck
) -> None:
    seed = int(os.environ.get("MEGAFLOW_CHAOS_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    bad = []
    for i in range(ROUNDS):
        at, after_kill, left = one_round(tmp_path / str(i), cgroups, rng, leaks)
        print(f"round {i}: killed at {at:.2f} of a start, {after_kill} processes left; gc: {left}")
        if not left.empty():
            bad.append((i, round(at, 2), left))
    assert not bad, f"seed {seed}: {len(bad)} of {ROUNDS} kills left something: {bad}"

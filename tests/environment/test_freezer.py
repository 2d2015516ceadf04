"""freezer: ending a cgroup's processes but a few, on cgroup v1 and v2.

Host processes in test groups (no sandbox): a launcher that stays, and what
it starts once inside the groups: a pid-hopping fork loop, a process whose
leader thread exited (it looks like a zombie) and a stopped one. This host
has v1 controllers and an otherwise empty v2 hierarchy; freezing and
``cgroup.kill`` are built into v2, so its branch is tested there, with the
v1 pids controller counting.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from megaflow.environment.local import cgroups, freezer

ROOT = Path("/sys/fs/cgroup")
V2 = ROOT / "unified"
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not (ROOT / "freezer" / "cgroup.procs").exists(),
    reason="needs root and the v1 freezer",
)
LAUNCHER = r"""
import ctypes, os, signal, sys, threading, time
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # its children are reaped, as init's are
sys.stdin.readline()
def child(fn):
    pid = os.fork()
    if pid == 0:
        fn()
        os._exit(0)
    return pid
def hop():
    while True:
        if os.fork():
            os._exit(0)
def zombie_leader():
    threading.Thread(target=lambda: time.sleep(1000)).start()
    ctypes.CDLL(None).syscall(60, 0)
def stopped():
    os.kill(os.getpid(), 19)
pids = [child(fn) for fn in (hop, zombie_leader, stopped)]
print(pids[1], flush=True)
time.sleep(1000)
"""


def _group(base: Path) -> Path:
    path = base / f"megaflow-test-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    return path


@pytest.fixture
def groups() -> Iterator[dict[str, Path]]:
    made = {"freezer": _group(ROOT / "freezer"), "pids": _group(ROOT / "pids")}
    if (V2 / "cgroup.procs").exists():
        made["v2"] = _group(V2)
    try:
        yield made
    finally:
        cgroups.remove_groups(list(made.values()))


@pytest.fixture
def launcher(groups: dict[str, Path]) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    for group in groups.values():
        (group / "cgroup.procs").write_text(str(proc.pid))
    proc.stdin.write("go\n")
    proc.stdin.flush()
    disguised = Path(f"/proc/{proc.stdout.readline().strip()}/stat")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and (
        len(freezer.members(groups["pids"])) < 4
        or disguised.read_text().rsplit(")", 1)[1].split()[0] != "Z"  # its leader exited
    ):
        time.sleep(0.01)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("version", [1, 2])
def test_all_but_the_kept_are_ended(
    version: int, groups: dict[str, Path], launcher: subprocess.Popen[str]
) -> None:
    freeze = groups["freezer"] if version == 1 else groups.get("v2")
    if freeze is None:
        pytest.skip("no v2 hierarchy")
    assert len(freezer.members(groups["pids"]) - {launcher.pid}) >= 3
    ok = freezer.end_all_but(freeze, version, groups["pids"], {launcher.pid}, 1)  # type: ignore[arg-type]
    assert ok
    assert freezer.members(groups["pids"]) == {launcher.pid}
    assert freezer.tasks(groups["pids"]) == 1  # every other task reaped, too
    assert launcher.poll() is None


def test_a_group_frozen_is_frozen_and_thawed_after(
    groups: dict[str, Path], launcher: subprocess.Popen[str]
) -> None:
    for version, group in ((1, groups["freezer"]), (2, groups.get("v2"))):
        if group is None:
            continue
        with freezer.frozen(group, version, time.monotonic() + 5) as done:  # type: ignore[arg-type]
            assert done
            state = Path(f"/proc/{launcher.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            assert state in ("D", "S")  # not running
        if version == 1:
            assert (group / "freezer.state").read_text().strip() == "THAWED"
        else:
            assert "frozen 0" in (group / "cgroup.events").read_text()


def test_without_a_freezer_nothing_is_killed_and_it_says_so(
    groups: dict[str, Path], launcher: subprocess.Popen[str]
) -> None:
    before = freezer.members(groups["pids"])
    assert not freezer.end_all_but(None, 1, groups["pids"], {launcher.pid}, 1, timeout=0.2)
    assert {p for p in before if os.path.exists(f"/proc/{p}")} >= {launcher.pid}
    assert len(freezer.members(groups["pids"])) > 1


@pytest.mark.parametrize("where", ["freezer", "v2"])
def test_kill_group_ends_everything(
    where: str, groups: dict[str, Path], launcher: subprocess.Popen[str]
) -> None:
    if where not in groups:
        pytest.skip("no v2 hierarchy")
    freezer.kill_group(groups[where])
    deadline = time.monotonic() + 5
    while freezer.members(groups[where]) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert freezer.members(groups[where]) == set()
    assert launcher.wait(5) == -9


def test_detect_adds_the_v1_freezer() -> None:
    layout = cgroups.detect("v1")
    assert layout is not None
    assert layout.mounts["freezer"] == ROOT / "freezer"

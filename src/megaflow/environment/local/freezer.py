"""Ending the processes of a cgroup from the host, by construction: freeze, kill, thaw.

A process in a frozen cgroup does not run: it cannot fork, exit or exec
until the group is thawed, and a SIGKILL sent meanwhile takes it as soon as
it is. So, with the group frozen, ``cgroup.procs`` is the complete list of
its processes and none of those pids can be freed and reused by a process
elsewhere (their parents are frozen too, so none is reaped). Killing that
list and thawing leaves no survivor, whatever the processes did to their
``/proc`` entries (names that look like a zombie's, SIGSTOP, setsid, double
forks, a fork loop within the pids limit).

What is alive is read from the kernel's own accounting, which no process
in the group can forge: membership (``cgroup.procs``) and the pids
controller's count (``pids.current``, which counts every task from fork
until it is reaped, zombies included).

cgroup v1 freezes through the ``freezer`` controller (``freezer.state``),
v2 through ``cgroup.freeze`` and ``cgroup.events``. v2's ``cgroup.kill`` is
not used: it misses a process whose leader thread exited (:func:`kill_group`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

Version = Literal[1, 2]


def members(group: Path) -> set[int]:
    """The pids in ``group`` (its ``cgroup.procs``); empty if it is gone."""
    try:
        return {int(p) for p in (group / "cgroup.procs").read_text().split()}
    except (OSError, ValueError):
        return set()


def tasks(pids_group: Path) -> int:
    """``pids.current`` of a group with the pids controller; -1 if unreadable."""
    try:
        return int((pids_group / "pids.current").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return -1


def _is_frozen(group: Path, version: Version) -> bool:
    if version == 1:
        return (group / "freezer.state").read_text().strip() == "FROZEN"
    return "frozen 1" in (group / "cgroup.events").read_text().splitlines()


def thaw(group: Path, version: Version) -> None:
    if version == 1:
        (group / "freezer.state").write_text("THAWED")
    else:
        (group / "cgroup.freeze").write_text("0")


@contextlib.contextmanager
def frozen(group: Path, version: Version, deadline: float) -> Iterator[bool]:
    """Freeze ``group`` for the block; yields whether it got frozen before
    ``deadline`` (a process in an uninterruptible sleep can hold it up).
    The group is thawed afterwards in every case."""
    try:
        if version == 1:
            (group / "freezer.state").write_text("FROZEN")
        else:
            (group / "cgroup.freeze").write_text("1")
        pause = 0.0002
        while not (done := _is_frozen(group, version)) and time.monotonic() < deadline:
            time.sleep(pause)
            pause = min(pause * 2, 0.01)
        yield done
    finally:
        thaw(group, version)


def kill_frozen(group: Path, keep: set[int]) -> int:
    """SIGKILL every process of the frozen ``group`` but ``keep``; how many."""
    killed = 0
    for pid in members(group) - keep:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
            killed += 1
    return killed


def end_all_but(
    freeze_group: Path | None,
    version: Version,
    pids_group: Path,
    keep: set[int],
    keep_tasks: int,
    timeout: float = 5.0,
) -> bool:
    """Kill every process of the sandbox's groups but ``keep``, until the pids
    controller counts only the ``keep_tasks`` tasks of those and membership is
    exactly ``keep``; False if that does not happen within ``timeout`` (or
    there is no freezer and something else lives: killing by pid without a
    freeze could hit a recycled pid outside the group)."""
    deadline = time.monotonic() + timeout
    while True:
        if tasks(pids_group) == keep_tasks and members(pids_group) == keep:
            return True
        if freeze_group is None or time.monotonic() > deadline:
            return False
        with frozen(freeze_group, version, deadline) as done:
            if done:
                kill_frozen(freeze_group, keep)
        # the killed die once thawed; their parents (the exec server, the
        # sandbox's init) reap them
        time.sleep(0.002)


def kill_group(group: Path) -> None:
    """Kill everything in ``group`` for good (it is being removed): freeze and
    kill where it can be frozen, else by pid.

    Not v2's ``cgroup.kill``: it signals each process's leader thread alone,
    and a process whose leader has exited while another thread runs (what
    ``/proc`` shows as a zombie) ignores that and lives on (seen on 6.18);
    ``kill(2)`` of its pid reaches the whole process."""
    version: Version | None = None
    if (group / "cgroup.freeze").exists():
        version = 2
    elif (group / "freezer.state").exists():
        version = 1
    if version is None:
        kill_frozen(group, set())
        return
    with contextlib.suppress(OSError), frozen(group, version, time.monotonic() + 2.0):
        kill_frozen(group, set())


def can_freeze(group: Path) -> bool:
    return (group / "cgroup.freeze").exists() or (group / "freezer.state").exists()

"""The CPU that work other than the benchmark's used while it ran, read from ``/proc``.

The load average cannot answer "did other work shape these figures?" on a
2-core machine: it counts the benchmark's own runnable tasks (two gloo ranks,
four graders at once, a thousand sandboxes) and it remembers the last minute,
so a benchmark that starts after a busy one starts "loaded". This module asks
the question of the processes directly. A process is the benchmark's own when
it, or one of its ancestors, is the benchmark's process, carries the marker
this module puts in the environment at import (``MEGAFLOW_BENCH_TREE``), which
what the benchmark starts inherits even when it detaches (Ray's daemons after
``ray start`` exits, a server in its own session; a sandbox's processes, whose
environment is cleared, descend from one that has it), or names on its command
line a path the benchmark claimed (:meth:`OtherWork.claim`): podman starts
each container's conmon detached and with an environment of its own, and
conmon names the storage folder the benchmark gave podman. Kernel threads are
left out. Every other process is other work: the CPU
it used between two samples (user and system time, its own and its reaped
children's), over the interval, is the cores other work took.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

MARK_ENV = "MEGAFLOW_BENCH_TREE"
PF_KTHREAD = 0x00200000
TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, int, int, int, bool] | None:
    """(parent, flags, CPU ticks, start time, a zombie) of ``pid``. The ticks
    include its reaped children's, except for init's: it reaps every orphan,
    the benchmark's own too (a killed Ray node's processes)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = text[text.rfind(")") + 2 :].split()  # fields from the state on
    ticks = sum(int(x) for x in rest[11 : 13 if pid == 1 else 15])
    return int(rest[1]), int(rest[6]), ticks, int(rest[19]), rest[0] == "Z"


def _comm(pid: int) -> str:
    if pid == 1:
        return "init (pid 1)"
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() or str(pid)
    except OSError:
        return f"pid {pid} (gone)"


def _marked(pid: int, mark: bytes, claims: list[bytes]) -> bool:
    """Whether ``pid`` carries the marker or names a claimed path."""
    try:
        if mark in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
            return True
        if claims:
            line = Path(f"/proc/{pid}/cmdline").read_bytes()
            return any(claim in line for claim in claims)
    except OSError:
        pass
    return False


class OtherWork:
    """Cores other processes used between calls of :meth:`sample`."""

    def __init__(self, root: int | None = None, mark: str | None = None) -> None:
        self.root = root or os.getpid()
        if mark is None:  # one marker per benchmark process, inherited by what it starts
            mark = os.environ.setdefault(MARK_ENV, f"{self.root}.{time.time_ns()}")
        self.mark = f"{MARK_ENV}={mark}".encode()
        self._marks: dict[tuple[int, int], bool] = {}  # (pid, start) -> carries the marker
        self._ours: set[tuple[int, int]] = set()  # once the benchmark's, always (orphaned too)
        self._claims: list[bytes] = []
        self._last = self._others()
        self._t = time.monotonic()
        self.totals: dict[str, int] = {}
        """CPU ticks of other work by command name, over every sample so far."""

    def _others(self) -> dict[tuple[int, int], tuple[int, bool, int]]:
        """Every process's CPU ticks, whether it is other work, and its parent."""
        procs = {}
        for name in os.listdir("/proc"):
            if name.isdigit() and (got := _stat(int(name))) is not None:
                procs[int(name)] = got
        mine: dict[int, bool] = {}

        def is_mine(pid: int) -> bool:
            chain = []
            while pid not in mine:
                got = procs.get(pid)
                if pid == self.root:
                    mine[pid] = True
                elif got is None or pid <= 1:
                    mine[pid] = False
                else:
                    key = (pid, got[3])
                    if key not in self._marks:
                        # an orphan first seen dead has no environment or command
                        # line left to ask; init, whose reaped children's CPU is
                        # not counted, is about to take it: it goes uncounted too
                        # (a conmon that lived under a second, seen as it ended)
                        orphan_end = got[4] and got[0] == 1
                        self._marks[key] = orphan_end or _marked(pid, self.mark, self._claims)
                    if key in self._ours or self._marks[key]:
                        mine[pid] = True
                    else:
                        chain.append(pid)
                        pid = got[0]
                        continue
            for seen in chain:
                mine[seen] = mine[pid]
                if mine[pid]:
                    self._ours.add((seen, procs[seen][3]))
            return mine[pid]

        return {
            (pid, got[3]): (got[2], not got[1] & PF_KTHREAD and not is_mine(pid), got[0])
            for pid, got in procs.items()
        }

    def claim(self, path: str) -> None:
        """Count as the benchmark's own, from the next sample on, every process
        whose command line names ``path`` (a folder the benchmark made, such as
        a podman storage root), and what descends from it."""
        self._claims.append(os.fsencode(path))
        self._marks.clear()  # processes seen before are asked again

    def by_process(self) -> dict[tuple[int, int], int]:
        """CPU ticks each other process used since the last sample; takes the sample.
        Every process's ticks are kept, so one that becomes other work (its
        ancestor gone) counts only what it used since, not its whole life, and
        a shell that reaps a command which ran before the benchmark began
        counts only what the command used since."""
        now = self._others()
        # a child's ticks reach its parent's when it is reaped, whole: what it
        # used while it was seen was counted then (or before this began), so
        # the parent is credited its reaped children's last-seen ticks, and
        # those of their children reaped into them within the same interval
        # (init's reaped children are not counted at all)
        counted: dict[int, int] = {}
        gone = {key[0]: (ticks, parent) for key, (ticks, _, parent) in self._last.items()
                if key not in now}  # fmt: skip
        for ticks, parent in gone.values():
            while parent in gone:  # reaped into a parent that went too: on to its reaper
                parent = gone[parent][1]
            if parent > 1:
                counted[parent] = counted.get(parent, 0) + ticks
        used = {
            key: max(0, ticks - self._last.get(key, (0, False, 0))[0] - counted.get(key[0], 0))
            for key, (ticks, other, _) in now.items()
            if other
        }
        self._last = now
        for (pid, _), ticks in used.items():
            if ticks:
                name = _comm(pid)
                self.totals[name] = self.totals.get(name, 0) + ticks
        return used

    def top(self, n: int = 3) -> str:
        """The other processes that used the most CPU so far: "name 1.2 s, ..."."""
        most = sorted(self.totals.items(), key=lambda kv: -kv[1])[:n]
        return ", ".join(f"{name} {ticks / TICKS:.1f} s" for name, ticks in most) or "none"

    def sample(self) -> float:
        """Cores other work used since the last sample (or since this was made)."""
        t0 = self._t
        ticks = sum(self.by_process().values())
        self._t = time.monotonic()
        return ticks / TICKS / max(self._t - t0, 1e-3)

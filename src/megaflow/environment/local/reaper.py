"""Remove what a crashed MegaFlow process left behind on this host.

A sandbox is an orphan when the process that recorded it is gone (its pid
and start time no longer match) or its deadline has passed. For each orphan
the reaper kills the bubblewrap process and everything in its cgroups,
unmounts anything mounted below its directory, removes its cgroups and its
directory. cgroups of dead MegaFlow processes are removed even when their
directory is already gone, and so are their staging mounts below
``/run/megaflow``; then any process still carrying a dead maker's marker
(none, with cgroups; under ``cgroups: off`` one a start left) is killed
(:mod:`.sweep`). A directory still being made (``.new-<maker>-<id>``) is
removed once its maker is gone, one being removed (``.gone-<id>``) always.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

from megaflow.environment.local.cgroups import CgroupLayout, remove_groups
from megaflow.environment.local.records import (
    SandboxRecord,
    key_alive,
    remove_sandbox_dir,
    sandbox_dir_state,
)
from megaflow.environment.local.sweep import sweep
from megaflow.environment.local.userns import reap_stages

# A directory with an id's name but no record was not made by make_sandbox_dir
# (an older version's, or someone else's): it is left alone this long.
STRAY_DIR_AGE_S = 300


def mounts_below(path: Path) -> list[str]:
    """Mount points at or below ``path`` in this mount namespace."""
    prefix = str(path.resolve())
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].replace("\\040", " ")
            if point == prefix or point.startswith(prefix + "/"):
                found.append(point)
    return sorted(found, key=len, reverse=True)


class Reaper:
    def __init__(self, sandbox_root: Path, layout: CgroupLayout | None, process: str) -> None:
        self.root = sandbox_root
        self.layout = layout
        self.process = process
        self.swept = 0
        """How many stray sandbox processes the marker sweep killed (last ``reap``)."""
        self.left: list[Path] = []
        """Groups of this process's own sandboxes still held by the kernel after
        ``reap``: retry them on the next (a dead owner's are found again anyway)."""

    def reap(self, live: set[str], pending: list[Path] | None = None) -> int:
        """Remove every orphan; return how many sandboxes were removed (the
        processes the marker sweep killed are counted in ``swept``). ``pending``:
        groups of this process's torn-down sandboxes the kernel held too long."""
        self.left = remove_groups(pending or [], timeout=0.0)
        count = 0
        now = time.time()
        if os.geteuid() == 0:  # first: a staged view keeps directories below it busy
            reap_stages(lambda key: key == self.process or key_alive(key))
        if self.root.is_dir():
            for entry in self.root.iterdir():
                if entry.name in live:
                    continue
                kind, maker = sandbox_dir_state(entry.name)
                if kind == "gone":  # torn down already; its removal was cut short
                    self._remove_dir(entry)
                    continue
                if kind == "new":
                    if maker != self.process and not key_alive(maker):
                        self._remove_dir(entry)
                        count += 1
                    continue
                record = SandboxRecord.load(entry)
                if record is None:
                    try:
                        age = now - entry.stat().st_mtime
                    except FileNotFoundError:
                        continue  # another process removed its own sandbox meanwhile
                    if age > STRAY_DIR_AGE_S:
                        self._remove_dir(entry)
                        count += 1
                    continue
                owned = record.process == self.process or key_alive(record.process)
                if owned and record.deadline > now:
                    continue
                self.kill(record)
                self._remove_dir(entry)
                count += 1
        self._reap_cgroups()
        self.swept = sweep(lambda key: key == self.process or key_alive(key))
        return count

    def kill(self, record: SandboxRecord) -> None:
        if record.bwrap_alive() and record.bwrap_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(record.bwrap_pid, signal.SIGKILL)
        paths = [Path(p) for p in record.cgroups]
        self.left += remove_groups([p for p in paths if p.exists()])

    def _remove_dir(self, directory: Path) -> None:
        for point in mounts_below(directory):
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)
        remove_sandbox_dir(directory)

    def _reap_cgroups(self) -> None:
        """Remove the groups of every owner that is gone. An owner's groups of every
        hierarchy are removed together, the freezer's first: a sandbox left frozen
        by a maker that died mid-kill or mid-reset (both freeze it for a moment)
        cannot die, and so leave its cpu or memory group, until it is thawed."""
        if self.layout is None:
            return
        dead: dict[str, list[Path]] = {}
        for base in self.layout.bases():
            if not base.is_dir():
                continue
            for owner in base.iterdir():
                if not owner.is_dir() or owner.name == self.process or key_alive(owner.name):
                    continue
                try:  # another process's reaper may have removed it since the listing
                    groups = [p for p in owner.iterdir() if p.is_dir()]
                except FileNotFoundError:
                    continue
                dead.setdefault(owner.name, []).extend([*groups, owner])
        for paths in dead.values():
            remove_groups(paths)

"""On-disk records of local sandboxes, so a later process can clean up after a crash.

Each sandbox directory holds ``record.json``: its id, owner, deadline, the
MegaFlow process that made it (pid and start time, which together survive pid
reuse), the bubblewrap pid and the cgroup directories. The reaper reads these.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

RECORD = "record.json"


def start_time(pid: int) -> int | None:
    """The kernel's start time of ``pid`` (clock ticks since boot), None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def process_key(pid: int | None = None) -> str:
    """``<pid>.<start time>``: names one process for its whole life."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}.{start_time(pid)}"


def key_alive(key: str) -> bool:
    pid, _, started = key.partition(".")
    return pid.isdigit() and str(start_time(int(pid))) == started


@dataclass
class SandboxRecord:
    id: str
    owner: str | None
    deadline: float
    created_at: float
    image: str
    process: str  # process_key() of the MegaFlow process that made the sandbox
    bwrap_pid: int | None = None
    bwrap_started: int | None = None
    cgroups: list[str] = field(default_factory=list)

    def save(self, sandbox_dir: Path) -> None:
        tmp = sandbox_dir / (RECORD + ".tmp")
        tmp.write_text(json.dumps(asdict(self)))
        tmp.rename(sandbox_dir / RECORD)

    @classmethod
    def load(cls, sandbox_dir: Path) -> SandboxRecord | None:
        try:
            return cls(**json.loads((sandbox_dir / RECORD).read_text()))
        except (OSError, ValueError, TypeError):
            return None

    def bwrap_alive(self) -> bool:
        return self.bwrap_pid is not None and start_time(self.bwrap_pid) == self.bwrap_started


def remove_sandbox_dir(sandbox_dir: Path) -> None:
    """Remove a sandbox directory with its record last, so that a crash midway
    leaves a directory whose maker the reaper still knows (a directory without
    a record is left alone for a while: it may be a sandbox still starting)."""
    try:
        entries = list(sandbox_dir.iterdir())
    except FileNotFoundError:
        return
    for entry in entries:
        if entry.name == RECORD:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    shutil.rmtree(sandbox_dir, ignore_errors=True)

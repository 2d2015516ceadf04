"""On-disk records of local sandboxes, so a later process can clean up after a crash.

Each sandbox directory holds ``record.json``: its id, owner, deadline, the
MegaFlow process that made it (its process key: pid, start time and pid
namespace), the bubblewrap pid and the cgroup directories. The reaper reads these.

A process key names one process for its whole life: the pid and start time
together survive pid reuse, and the pid namespace says where the pid means
something. A reaper judges only keys of its own pid namespace: run from
another one (a container sharing the host's cgroups and ``/run``, or
``unshare --pid``), every host process looks gone, so it would remove every
live sandbox's cgroups and staged views. A key of another namespace is
treated as alive; its sandboxes go when their deadline passes, or when a
reaper of their own namespace finds their maker gone.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

RECORD = "record.json"
NEW = ".new-"  # a sandbox directory being made: .new-<maker's process key>-<id>
GONE = ".gone-"  # a sandbox directory being removed
DirState = Literal["new", "gone", "sandbox"]


def start_time(pid: int) -> int | None:
    """The kernel's start time of ``pid`` (clock ticks since boot), None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


INIT_PID_NS = 0xEFFFFFFC
"""The inode of the host's initial pid namespace (the kernel's ``PROC_PID_INIT_INO``)."""


@functools.cache
def pid_namespace() -> int:
    """This process's pid namespace (the inode of ``/proc/self/ns/pid``), fixed
    for its life."""
    return os.stat("/proc/self/ns/pid").st_ino


def process_key(pid: int | None = None) -> str:
    """``<pid>.<start time>.<pid namespace>`` of process ``pid`` (this one by
    default), as this process sees it."""
    if pid is None:
        pid, namespace = os.getpid(), pid_namespace()
    else:
        namespace = os.stat(f"/proc/{pid}/ns/pid").st_ino
    return f"{pid}.{start_time(pid)}.{namespace}"


def key_alive(key: str) -> bool:
    """False only when the process ``key`` names is known to be gone: its pid
    namespace is this one and its pid no longer runs with that start time. A
    key of another pid namespace cannot be judged from here and counts as
    alive. A key of an older version (``<pid>.<start time>``, no namespace)
    is judged only from the host's initial pid namespace, where such keys
    were made."""
    pid, _, rest = key.partition(".")
    started, _, namespace = rest.partition(".")
    if namespace != str(pid_namespace()) and (namespace or pid_namespace() != INIT_PID_NS):
        return True
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


def sandbox_dir_state(name: str) -> tuple[DirState, str]:
    """What an entry of the sandbox root is, by its name, and for a "new" one its
    maker's process key ("" otherwise)."""
    if name.startswith(NEW):
        return "new", name[len(NEW) :].partition("-")[0]
    if name.startswith(GONE):
        return "gone", ""
    return "sandbox", ""


def make_sandbox_dir(directory: Path, record: SandboxRecord) -> None:
    """Make ``directory`` with ``record`` already in it: it is made under a name
    that carries its maker's key, then renamed, so a crash at any point leaves
    either nothing or a directory whose maker the reaper knows."""
    making = directory.with_name(f"{NEW}{record.process}-{directory.name}")
    making.mkdir(mode=0o711)
    record.save(making)
    making.rename(directory)


def remove_sandbox_dir(sandbox_dir: Path) -> None:
    """Remove a sandbox directory (its processes killed, its mounts gone): it is
    renamed to a ``.gone-`` name first, which the reaper removes whoever left it,
    so a crash midway never leaves a directory that looks like a live sandbox."""
    target = sandbox_dir
    if sandbox_dir_state(sandbox_dir.name)[0] == "sandbox":
        target = sandbox_dir.with_name(GONE + sandbox_dir.name)
        try:
            sandbox_dir.rename(target)
        except FileNotFoundError:
            return
        except OSError:  # a stale ``.gone-`` of the same name: remove in place
            target = sandbox_dir
    # The sandbox wrote what is below rw/: rmtree walks it through descriptors and
    # never follows a link on Linux (shutil.rmtree.avoids_symlink_attacks).
    shutil.rmtree(target, ignore_errors=True)

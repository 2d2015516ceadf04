"""Find the processes a dead MegaFlow process left, by their marker, and end them.

Every process of a local sandbox starts with ``MEGAFLOW_SANDBOX=<pid
namespace>/<maker's key>/<sandbox id>`` in its environment
(:data:`MARKER`): the step that joins the cgroups, bubblewrap, the
sandbox's init and the exec server. With cgroups the reaper ends a dead
maker's processes through its groups, which no process can leave; this sweep
is the second layer, and the only one under ``cgroups: off``. It reads each
process's initial environment (``/proc/<pid>/environ``, what it was started
with: clearing the environment later does not change it) and SIGKILLs the
ones whose maker is gone. Each process is held by a pidfd from before its
environment is read until it is signalled, so a pid freed and reused in
between is never hit. Only markers of this pid namespace count: a MegaFlow
process in another one (a container) has keys that mean nothing here.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable

from megaflow.environment.local.records import pid_namespace

MARKER = "MEGAFLOW_SANDBOX"
"""The environment variable naming each sandbox process's pid namespace, maker
and sandbox (``<pid namespace>/<process key>/<sandbox id>``), so a process of
the sandbox is found in ``/proc`` whatever its parent or cgroup."""
_PREFIX = MARKER.encode() + b"="


def marker(process: str, sandbox_id: str) -> str:
    """The marker's value for sandbox ``sandbox_id`` made by process key ``process``."""
    return f"{pid_namespace()}/{process}/{sandbox_id}"


def maker_of(pid: int, namespace: int) -> str | None:
    """The key of the MegaFlow process that started ``pid``'s sandbox, when
    ``pid`` carries a marker of ``namespace``; None otherwise (or unreadable)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read()
    except OSError:
        return None
    for entry in environ.split(b"\0"):
        if entry.startswith(_PREFIX):
            ns, _, rest = entry[len(_PREFIX) :].decode(errors="replace").partition("/")
            key, _, _ = rest.partition("/")
            return key if ns == str(namespace) and key else None
    return None


def sweep(alive: Callable[[str], bool]) -> int:
    """SIGKILL every process whose marker names a maker ``alive`` says is gone;
    return how many were signalled. Blocking (reads ``/proc``)."""
    namespace = pid_namespace()
    me = os.getpid()
    killed = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            pidfd = os.pidfd_open(int(entry))
        except OSError:  # gone already
            continue
        try:
            key = maker_of(int(entry), namespace)
            if key is None or alive(key):
                continue
            # ESRCH if it exited since the pidfd was opened: its pid, maybe
            # reused by now, is not signalled
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                killed += 1
        finally:
            os.close(pidfd)
    return killed

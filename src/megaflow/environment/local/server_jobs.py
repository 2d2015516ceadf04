"""The exec server's processes: the agent's identity, commands, terminals, kill-all.

First of the exec server's parts (all of them are listed in ``server``'s
docstring; :func:`megaflow.environment.local.launcher.server_payload` sends
them in order and the sandbox runs them in one namespace). Like the rest
of the server it is standard-library only, imports little and never imports
MegaFlow.

A forked child becomes the agent for good (:func:`become_agent`: no groups,
uid and gid 1000, so no capabilities) before anything of the agent's runs;
a command runs in its own session, so a timeout kills its whole process
group. :class:`Job` is one running command as the server tracks it.
"""

from __future__ import annotations

import errno
import os
import sys
import time

# Imports cost every sandbox start: no typing, and the C signal module (the
# stdlib wrapper pulls in enum, functools and collections, about 8 ms).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from collections.abc import Callable
    from typing import Any

    Head = dict[str, Any]
else:
    import _signal as signal

AGENT = 1000  # uid and gid of everything run for the host
INF = float("inf")
MAX_FRAME = int(sys.argv[3]) if len(sys.argv) > 3 else 64 << 20
HEAD_ROOM = 1 << 16  # a reply's header stays below this
CHUNK = 65536  # one read of a command's pipe or a terminal


def become_agent() -> None:
    """In a forked child, for good: no groups, the agent's gid and uid (which
    clears every capability), before anything of the agent's runs."""
    os.setgroups([])
    os.setgid(AGENT)
    os.setuid(AGENT)


def _reset_signals() -> None:
    # python ignores SIGPIPE and SIGXFSZ, and ignored signals survive exec:
    # `yes | head` would never end. A host started in the background (or under
    # nohup) ignores SIGINT, SIGQUIT or SIGHUP, and a shell cannot trap a signal
    # ignored on entry: Ctrl-C would never reach an agent's command.
    for sig in (signal.SIGCHLD, signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGQUIT,
                signal.SIGHUP):  # fmt: skip
        signal.signal(sig, signal.SIG_DFL)


def _exec_as_agent(head: Head) -> None:
    become_agent()
    os.chdir(head["cwd"])
    os.execvpe(head["argv"][0], head["argv"], head["env"])


def exec_child(head: Head, stdin: int, out_w: int, err_w: int) -> None:
    """In a forked child, never returning: its own session (so a timeout kills
    the whole group), ``stdin`` and the output pipes in place, then the command."""
    try:
        os.setsid()
        os.dup2(stdin, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)  # every other fd of ours is close-on-exec (PEP 446)
        _reset_signals()
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        try:  # the command, not this server, is what the OOM killer takes
            fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
            os.write(fd, b"1000")  # not open(): the io stack costs a forked child 0.3 ms
            os.close(fd)
        except OSError:
            pass
        _exec_as_agent(head)
    except BaseException as e:
        os.write(2, f"megaflow: cannot run {head['argv'][0]!r}: {e}\n".encode())
    os._exit(127)


def pty_child(head: Head) -> None:
    """In the child of ``forkpty``, never returning: the terminal's command."""
    try:
        _reset_signals()
        _exec_as_agent(head)
    except BaseException as e:
        os.write(2, f"megaflow: cannot run {head['argv'][0]!r}: {e}\n".encode())
    os._exit(127)


class Job:
    """One running command: its pipes, what it printed, when it must die."""

    def __init__(self, rid: int, pid: int, fds: tuple[int, int], cap: int, deadline: float) -> None:
        self.rid, self.pid, self.fds, self.cap, self.deadline = rid, pid, fds, cap, deadline
        self.bufs = (bytearray(), bytearray())
        self.open = [True, True]
        self.truncated = False
        self.timed_out = False
        self.started = time.monotonic()

    def take(self, stream: int, data: bytes) -> None:
        buf = self.bufs[stream]
        room = self.cap - len(buf)
        if len(data) > room:
            self.truncated = True
            data = data[: max(room, 0)]
        buf += data


def kill_all(reap: Callable[[], None], timeout: float = 10.0) -> None:
    """SIGKILL every process of the sandbox but this server and its init, and
    wait until none is left, not even one unreaped; ``reap`` collects the
    server's own children as they die.

    ``kill(-1)`` signals every process of this pid namespace (and of any below
    it) but init and the caller, in one system call: a fork racing it either
    finished before it (the child is signalled too) or fails because the parent
    already has SIGKILL pending. Nothing is read from ``/proc``, whose state
    the processes control (a name that looks like a zombie's, a pid that hops
    faster than a listing). ``kill(-1, 0)`` finds zombies too, so ESRCH means
    nothing is left. The host then checks the sandbox's cgroup as well."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.kill(-1, signal.SIGKILL)
            reap()
            os.kill(-1, 0)
        except ProcessLookupError:
            return
        if time.monotonic() > deadline:
            raise OSError(errno.ETIMEDOUT, "processes of the sandbox outlived kill(-1)")
        time.sleep(0.001)


_IPC_RMID = 0


def remove_ipc() -> int:
    """Remove every System V shared memory segment, message queue and semaphore
    set of the sandbox's IPC namespace (they outlive their processes, so a
    persistent sandbox would hand them to the next task); return how many.
    The ids come from ``/proc/sysvipc`` (the kernel's list, which no process
    can hide an entry from). Removal runs as the agent, who created them all
    (creator or owner may remove; the server has no CAP_SYS_ADMIN)."""
    found = []
    for kind in ("shm", "msg", "sem"):
        with open(f"/proc/sysvipc/{kind}", "rb") as f:
            found += [(kind, int(line.split()[1])) for line in f.read().splitlines()[1:]]
    if not found:
        return 0
    import ctypes  # only when there is something to remove (about 10 ms)

    libc = ctypes.CDLL(None, use_errno=True)
    calls = {"shm": libc.shmctl, "msg": libc.msgctl, "sem": libc.semctl}
    os.setegid(AGENT)
    os.seteuid(AGENT)
    try:
        for kind, ident in found:
            if kind == "sem":
                calls[kind](ident, 0, _IPC_RMID)
            else:
                calls[kind](ident, _IPC_RMID, None)
    finally:
        os.seteuid(0)
        os.setegid(0)
    for kind in ("shm", "msg", "sem"):
        with open(f"/proc/sysvipc/{kind}", "rb") as f:
            if len(f.read().splitlines()) > 1:
                raise OSError(errno.EBUSY, f"a System V {kind} object could not be removed")
    return len(found)

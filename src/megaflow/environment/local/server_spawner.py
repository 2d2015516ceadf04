"""The exec server's spawner: commands started with ``posix_spawn``, not a Python fork.

Second of the exec server's parts (after ``server_jobs``; see ``server``'s
docstring). Forking the server (a Python process of several MiB) for every
command cost about 1 ms of CPU per ``exec``. ``posix_spawn`` (glibc: a
``vfork``-like clone that shares memory until the exec) is far cheaper, but
it cannot change the uid or set ``oom_score_adj``, so it cannot be called by
the server itself (uid 0). Both are inherited, though: the spawner is one
child of the server that becomes the agent for good and raises its own
``oom_score_adj`` to 1000, and every command it starts inherits both.

Guarantees kept, and how:

- *Commands run as the agent, never as root.* The spawner drops to the agent's
  ids before its loop starts; a new one after it died does the same.
- *The agent cannot reach the server's channel.* The spawner closes every fd
  it inherited from the server (the host pipe, other commands' pipes) but its
  socket and /dev/null; the socket is close-on-exec, so no command has it.
  Having changed uid, the spawner is not dumpable: a process of the agent
  (same uid) can neither ptrace it nor open ``/proc/<spawner>/fd``.
- *Output is never the spawner's to forge.* The server makes each command's
  pipes and keeps the read ends; the spawner only places the write ends as
  the command's stdout and stderr (passed with ``SCM_RIGHTS``) and reports
  the pid and, later, the exit status. A zombie is reported before it is
  reaped (``WNOWAIT``), so its pid is not reused while the server may still
  kill its process group. Timeouts and kills stay the server's (``CAP_KILL``;
  the host kills by cgroup).
- *The agent may lower the spawner's limits* (``prlimit``, same uid), its
  priority, CPU affinity or scheduling policy (``chrt -i``), which later
  commands would inherit. The
  spawner compares them with what it started with before each start (changed:
  it quits, that exec fails) and after it (changed: it kills that command,
  which ends with 137, and quits); the next spawner starts afresh.
- *The agent may kill or stop the spawner* (same uid; ``kill -9 -1`` does).
  The server notices (its socket closes, ``SIGCHLD``), kills it, takes the
  exits it had reported and starts a new spawner at the next exec. The
  server is the sandbox's child subreaper, so the spawner's commands become
  its children: it reaps them and answers their execs as usual. Only a
  request the spawner had taken but not answered fails (it sends the pid
  right after the start, but a command may kill it first): exit 126, never
  the sandbox's error, as the agent killed it.
- *A full sandbox is the agent's doing.* A start that fails for want of a
  process or memory (``EAGAIN``, ``ENOMEM``: the pids or memory limit, which
  only the sandbox's processes fill) ends that exec with exit 126 and the
  reason on stderr, as does one whose spawner was killed or stopped before
  it reported the command (``server_commands.INSIDE_CAUSES``); any other
  failure (no such command, a bad cwd) is the command's: exit 127.

Messages are ``marshal``'ed tuples on a ``SOCK_SEQPACKET`` socket pair:
``(argv, env, cwd)`` with two fds from the server; ``("pid", pid)``,
``("err", text, errno)`` and ``("exit", pid, code)`` back.
"""

from __future__ import annotations

import _socket
import errno
import marshal
import os
import select
import struct

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from typing import Any

    from megaflow.environment.local.server_jobs import become_agent
else:
    import _signal as signal

# Python ignores these and ignored signals survive exec (``_reset_signals``).
DEFAULT_SIGNALS = (signal.SIGCHLD, signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGQUIT,
                   signal.SIGHUP)  # fmt: skip
FDS = struct.Struct("ii")
SPAWN_WAIT_S = 10.0  # a spawner that answers no request within this is killed
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
TAMPERED = 3  # the spawner's exit code when its limits were changed


def _close_inherited(keep: set[int]) -> None:
    """Close every fd but ``keep``: the spawner must hold none of the server's."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:  # the listing's own fd
                pass


def _undumpable() -> None:
    """Make sure no process of the agent can ptrace this one or read its fds.
    Changing uid already does it when the kernel's ``suid_dumpable`` is 0."""
    with open("/proc/sys/fs/suid_dumpable", "rb") as f:
        if f.read().strip() == b"0":
            return
    import ctypes  # only on hosts that keep setuid processes dumpable (about 10 ms)

    if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE)")


def _become_subreaper() -> None:
    """In the server, once: orphans of its descendants come to it, not to init.
    A spawner the agent kills leaves its commands behind; they become the
    server's children, so it still reaps them and reports their exit status."""
    import ctypes  # once per sandbox, at its first exec (about 3 ms)

    if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def _resolve(name: str, env: dict[str, str]) -> str:
    """The file ``execvpe`` would run: ``name`` searched in the command's own
    PATH (``posix_spawnp`` would search the spawner's)."""
    if "/" in name:
        return name
    for d in env.get("PATH", os.defpath).split(":"):
        path = (d or ".") + "/" + name
        if os.access(path, os.X_OK) and not os.path.isdir(path):
            return path
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)


def spawner_main(sock: int, devnull: int) -> None:
    """In the server's forked child, never returning: become the spawner."""
    code = 1
    try:
        wake_r, wake_w = os.pipe()  # before the server's wakeup pipe is closed
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        os.dup2(devnull, 0)  # not the host's pipe: 0, 1 and 2 are /dev/null
        null_w = os.open("/dev/null", os.O_WRONLY)
        os.dup2(null_w, 1)
        os.dup2(null_w, 2)
        _close_inherited({0, 1, 2, sock, devnull, wake_r, wake_w})
        fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
        os.write(fd, b"1000")  # the OOM killer takes commands (and this), not the server
        os.close(fd)
        become_agent()
        _undumpable()
        code = _serve(_socket.socket(fileno=sock), devnull, wake_r)
    finally:
        os._exit(code)


def _serve(sock: _socket.socket, devnull: int, wake_r: int) -> int:
    poll = select.poll()
    poll.register(sock.fileno(), select.POLLIN)
    poll.register(wake_r, select.POLLIN)
    space = _socket.CMSG_SPACE(FDS.size)
    import resource  # here, not at the top: every sandbox start would pay for it

    ids = sorted({getattr(resource, n) for n in dir(resource) if n.startswith("RLIMIT_")})

    def _limits() -> list[object]:  # and what else of ours a same-uid process may set
        return [*(resource.getrlimit(r) for r in ids), os.getpriority(os.PRIO_PROCESS, 0),
                os.sched_getaffinity(0), os.sched_getscheduler(0)]  # fmt: skip

    limits = _limits()
    while True:
        for fd, _ in poll.poll():
            if fd == wake_r:
                os.read(wake_r, 512)
                _report_exits(sock)
                continue
            msg, anc, _, _ = sock.recvmsg(1 << 20, space, _socket.MSG_CMSG_CLOEXEC)
            if not msg:
                return 0  # the server is gone
            fds = [f for lvl, typ, data in anc if typ == _socket.SCM_RIGHTS
                   for f in FDS.unpack(data[: FDS.size])]  # fmt: skip
            if _limits() != limits:
                return TAMPERED
            pid = 0
            try:
                argv, env, cwd = marshal.loads(msg)
                os.chdir(cwd)
                pid = os.posix_spawn(
                    _resolve(argv[0], env), argv, env,
                    file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 0),
                                  (os.POSIX_SPAWN_DUP2, fds[0], 1),
                                  (os.POSIX_SPAWN_DUP2, fds[1], 2)],
                    setsid=True, setsigmask=(), setsigdef=DEFAULT_SIGNALS,
                )  # fmt: skip
                # at once: the command runs already and may kill this process
                sock.send(marshal.dumps(("pid", pid), 4))
            except Exception as e:  # the errno tells a full sandbox from a bad command
                if pid:
                    raise  # the server's socket failed: it is gone
                err = (e.errno or 0) if isinstance(e, OSError) else 0
                sock.send(marshal.dumps(("err", str(e), err), 4))
            finally:
                for f in fds:
                    os.close(f)
            if _limits() != limits:  # changed while it started: it may have them
                if pid:
                    os.kill(pid, signal.SIGKILL)
                return TAMPERED


def _report_exits(sock: _socket.socket) -> None:
    """Tell the server of each exited child, then reap it (not before: its
    pid stays taken until the server knows it is gone)."""
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if info is None:
            return
        code = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
        sock.send(marshal.dumps(("exit", info.si_pid, code), 4))
        os.waitpid(info.si_pid, 0)


class SpawnerGone(Exception):
    """The spawner died, stopped or stopped answering."""


class Spawner:
    """The server's handle on its spawner: started at the first exec (so a
    fresh sandbox holds only bubblewrap, init and the server, as the host
    checks), and again after it is gone."""

    def __init__(self, devnull: int) -> None:
        self.devnull = devnull
        self.pid = 0
        self.sock: _socket.socket | None = None
        self.closed = False  # the spawner closed its end: it is gone
        self.subreaper = False

    def start(self) -> int:
        """Fork the spawner; return the fd to poll for its messages."""
        if not self.subreaper:
            _become_subreaper()
            self.subreaper = True
        ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            try:
                spawner_main(theirs.detach(), self.devnull)
            finally:
                os._exit(1)
        theirs.close()
        ours.setblocking(False)
        self.pid, self.sock, self.closed = pid, ours, False
        return ours.fileno()

    def send(self, argv: list[str], env: dict[str, str], cwd: str, out_w: int, err_w: int) -> None:
        """Ask for one command. SpawnerGone when the request did not reach a
        live spawner (nothing was started); EMSGSIZE when it is too large."""
        assert self.sock is not None
        msg = marshal.dumps((argv, env, cwd), 4)
        fds = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, FDS.pack(out_w, err_w))]
        try:
            self.sock.sendmsg([msg], fds)
        except (BrokenPipeError, ConnectionError, BlockingIOError) as e:
            raise SpawnerGone(f"it took no request ({e})") from e

    def messages(self) -> list[tuple[Any, ...]]:
        """What the spawner has sent so far; ``closed`` is set once it sent its
        last (what came before that is still returned: exits to report)."""
        out: list[tuple[Any, ...]] = []
        while self.sock is not None and not self.closed:
            try:
                msg = self.sock.recv(4096)
            except BlockingIOError:
                break
            except ConnectionError:
                msg = b""
            if not msg:
                self.closed = True
                break
            out.append(marshal.loads(msg))
        return out

    def alive(self) -> bool:
        """Running, not stopped (the agent can stop it: then it is useless)."""
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG | os.WUNTRACED)
        except ChildProcessError:  # reaped already
            self.pid = 0
            return False
        if pid == 0:
            return True
        if not os.WIFSTOPPED(status):  # it exited, and is reaped now
            self.pid = 0
        return False

    def stop(self) -> list[tuple[Any, ...]]:
        """Kill and reap the spawner (if it is still ours), close its socket;
        return what it sent that was not read yet (exits it reported before
        it died: their children are reaped, only these tell their status)."""
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        self.pid = 0
        left = self.messages()
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        return left

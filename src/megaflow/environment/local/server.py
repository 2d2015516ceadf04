"""The exec server that lives inside every local sandbox.

The host sends this file's text into a fresh sandbox, where the host's
``python3`` runs it; from then on every command, file read or write and reset
is one framed request over the sandbox's stdin/stdout pipe, so no bubblewrap
process starts per command. It must stay standard-library only, start fast
(few imports) and never import MegaFlow.

Frame: ``>II`` (header length, body length), a header dict in ``marshal``
format (version 4: plain types only, fast to load), then raw body bytes.
Requests carry an ``id``; replies echo it. Commands run each in their own
session (so a timeout kills the whole process group) with stdin on /dev/null.

The server is uid 0 of the sandbox with only CAP_SETUID, CAP_SETGID and
CAP_KILL. Every command and terminal runs as the agent (uid and gid 1000, no
supplementary groups, no capabilities), and the file operations done for the
host run with the agent's effective ids, so neither can reach this process
(its pipe to the host, its signals) or anything the agent could not.
"""

from __future__ import annotations

import errno
import io
import marshal
import os
import select
import struct
import sys
import time

# Imports cost every sandbox start: no typing, and the C signal module (the
# stdlib wrapper pulls in enum, functools and collections, about 8 ms).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from typing import Any

    Head = dict[str, Any]
else:
    import _signal as signal

HDR = struct.Struct(">II")
CHUNK = 65536
INF = float("inf")
MARSHAL_VERSION = 4
AGENT = 1000  # uid and gid of everything run for the host
MAX_FRAME = int(sys.argv[3]) if len(sys.argv) > 3 else 64 << 20
HEAD_ROOM = 1 << 16  # a reply's header stays below this


def become_agent() -> None:
    """In a forked child, for good: no groups, the agent's gid and uid (which
    clears every capability), before anything of the agent's runs."""
    os.setgroups([])
    os.setgid(AGENT)
    os.setuid(AGENT)


class AsAgent:
    """File operations with the agent's effective ids, restored afterwards."""

    def __enter__(self) -> None:
        os.setegid(AGENT)
        os.seteuid(AGENT)

    def __exit__(self, *exc: object) -> None:
        os.seteuid(0)
        os.setegid(0)


def check_members(tar: Any, dest: str) -> None:
    """Refuse members that would land outside ``dest``: absolute or ``..``
    names, links pointing out, anything written through a link of the same
    archive, devices and fifos. (Extraction runs as the agent too.)"""
    links: set[str] = set()
    for m in tar.getmembers():
        name = os.path.normpath(m.name)
        parts = name.split("/")
        parents = {"/".join(parts[:i]) for i in range(1, len(parts))}
        bad = name.startswith(("/", "..")) or m.isdev() or m.isfifo() or parents & links
        if m.issym() or m.islnk():
            base = os.path.dirname(name) if m.issym() else ""
            target = os.path.normpath(os.path.join(base, m.linkname))
            bad = bad or m.linkname.startswith("/") or target.split("/")[0] == ".."
            links.add(name)
        if bad:
            raise ValueError(f"refusing tar member {m.name!r}")
        m.mode &= 0o777


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


class Server:
    def __init__(self) -> None:
        self.inbuf = bytearray()
        self.jobs: dict[int, Job] = {}  # by pid
        self.by_fd: dict[int, tuple[Job, int]] = {}
        self.poll = select.poll()
        self.wake_r, wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.devnull = os.open("/dev/null", os.O_RDONLY)
        self.ptys: dict[int, int] = {}  # open terminal fd -> request id
        self.pty_pids: dict[int, int] = {}  # terminal process pid -> request id

    def send(self, head: Head, body: bytes = b"") -> None:
        raw = marshal.dumps(head, MARSHAL_VERSION)
        if len(body) + len(raw) > MAX_FRAME:
            raise OSError(errno.EFBIG, f"reply of {len(body)} bytes is above the frame limit")
        view = memoryview(HDR.pack(len(raw), len(body)) + raw + body)
        while view:
            view = view[os.write(1, view) :]

    def run(self) -> None:
        self.send({"op": "ready", "pid": os.getpid()})
        self.poll.register(0, select.POLLIN)
        self.poll.register(self.wake_r, select.POLLIN)
        while True:
            deadlines = [
                j.deadline for j in self.jobs.values() if not j.timed_out and j.deadline < INF
            ]
            wait = min(deadlines) - time.monotonic() if deadlines else None
            events = self.poll.poll(None if wait is None else max(wait, 0) * 1000 + 1)
            for fd, _ in events:
                if fd == 0:
                    data = os.read(0, 1 << 20)
                    if not data:
                        return
                    self.inbuf += data
                    self.dispatch()
                elif fd == self.wake_r:
                    self.drain_wake()
                elif fd in self.by_fd:
                    self.read_pipe(fd)
                elif fd in self.ptys:
                    self.read_pty(fd)
            self.reap()
            self.kill_late()

    def drain_wake(self) -> None:
        try:
            while os.read(self.wake_r, 512):
                pass
        except BlockingIOError:
            pass

    def dispatch(self) -> None:
        while len(self.inbuf) >= HDR.size:
            hlen, blen = HDR.unpack_from(self.inbuf)
            end = HDR.size + hlen + blen
            if len(self.inbuf) < end:
                return
            head = marshal.loads(bytes(self.inbuf[HDR.size : HDR.size + hlen]))
            body = bytes(self.inbuf[HDR.size + hlen : end])
            del self.inbuf[:end]
            try:
                getattr(self, "op_" + head["op"])(head, body)
            except Exception as e:  # a bad request must not kill the server
                if head.get("noreply"):
                    continue
                if isinstance(e, OSError):
                    error, code = e.strerror or str(e), e.errno or 0
                else:
                    error, code = f"{type(e).__name__}: {e}", 0
                self.send({"id": head["id"], "error": error, "errno": code})

    # -- commands ---------------------------------------------------------
    def op_exec(self, head: Head, body: bytes) -> None:
        argv = head["argv"]
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            pid = os.fork()
        except OSError:  # e.g. the pids limit is reached
            for fd in (out_r, out_w, err_r, err_w):
                os.close(fd)
            raise
        if pid == 0:  # child: own session, so a timeout kills the whole group
            try:
                os.setsid()
                os.dup2(self.devnull, 0)
                os.dup2(out_w, 1)
                os.dup2(err_w, 2)  # every other fd of ours is close-on-exec (PEP 446)
                # python ignores SIGPIPE and SIGXFSZ, and ignored signals survive exec:
                # `yes | head` would never end
                for sig in (signal.SIGCHLD, signal.SIGPIPE, signal.SIGXFSZ):
                    signal.signal(sig, signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_SETMASK, [])
                try:  # the command, not this server, is what the OOM killer takes
                    with open("/proc/self/oom_score_adj", "w") as f:
                        f.write("1000")
                except OSError:
                    pass
                become_agent()
                os.chdir(head["cwd"])
                os.execvpe(argv[0], argv, head["env"])
            except BaseException as e:
                os.write(2, f"megaflow: cannot run {argv[0]!r}: {e}\n".encode())
            os._exit(127)
        os.close(out_w)
        os.close(err_w)
        timeout = head.get("timeout")
        deadline = time.monotonic() + timeout if timeout is not None else INF
        cap = min(head["cap"], (MAX_FRAME - HEAD_ROOM) // 2)  # both streams fit one frame
        job = Job(head["id"], pid, (out_r, err_r), cap, deadline)
        self.jobs[pid] = job
        for i, fd in enumerate(job.fds):
            os.set_blocking(fd, False)
            self.by_fd[fd] = (job, i)
            self.poll.register(fd, select.POLLIN)

    def read_pipe(self, fd: int, budget: int = 1) -> None:
        job, i = self.by_fd[fd]
        for _ in range(budget):
            try:
                data = os.read(fd, CHUNK)
            except BlockingIOError:
                return
            if not data:
                self.close_pipe(fd)
                return
            job.take(i, data)

    def close_pipe(self, fd: int) -> None:
        job, i = self.by_fd.pop(fd)
        job.open[i] = False
        self.poll.unregister(fd)
        os.close(fd)

    def reap(self) -> None:
        while self.jobs or self.pty_pids:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            job = self.jobs.pop(pid, None)
            if job is not None:
                self.finish(job, status)
            rid = self.pty_pids.pop(pid, None)
            if rid is not None:
                fd = self.pty_fd(rid)
                while fd is not None and self.read_pty(fd):
                    pass
                if fd is not None and fd in self.ptys:
                    self.close_pty(fd)
                code = os.waitstatus_to_exitcode(status)
                self.send({"id": rid, "exit_code": 128 - code if code < 0 else code})

    def finish(self, job: Job, status: int) -> None:
        for fd in job.fds:  # what the command wrote before it exited is in the pipe
            if fd in self.by_fd:
                self.read_pipe(fd, budget=64)
                if fd in self.by_fd:
                    self.close_pipe(fd)
        code = os.waitstatus_to_exitcode(status)
        head = {
            "id": job.rid,
            "exit_code": 128 - code if code < 0 else code,
            "stdout_len": len(job.bufs[0]),
            "truncated": job.truncated,
            "timed_out": job.timed_out,
            "duration_s": time.monotonic() - job.started,
        }
        self.send(head, bytes(job.bufs[0]) + bytes(job.bufs[1]))

    def kill_late(self) -> None:
        now = time.monotonic()
        for job in self.jobs.values():
            if not job.timed_out and now >= job.deadline:
                job.timed_out = True
                try:
                    os.killpg(job.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    # -- terminals: output streams back as frames with the request's id ----
    def op_pty(self, head: Head, body: bytes) -> None:
        pid, fd = os.forkpty()
        if pid == 0:
            try:
                for sig in (signal.SIGCHLD, signal.SIGPIPE, signal.SIGXFSZ):
                    signal.signal(sig, signal.SIG_DFL)
                become_agent()
                os.chdir(head["cwd"])
                os.execvpe(head["argv"][0], head["argv"], head["env"])
            except BaseException as e:
                os.write(2, f"megaflow: cannot run {head['argv'][0]!r}: {e}\n".encode())
            os._exit(127)
        os.set_blocking(fd, False)
        self.ptys[fd] = head["id"]
        self.pty_pids[pid] = head["id"]
        self.poll.register(fd, select.POLLIN)
        self.resize(fd, head.get("rows", 24), head.get("cols", 80))

    def pty_fd(self, rid: int) -> int | None:
        return next((fd for fd, r in self.ptys.items() if r == rid), None)

    def resize(self, fd: int, rows: int, cols: int) -> None:
        import fcntl
        import termios

        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def op_pty_in(self, head: Head, body: bytes) -> None:
        fd = self.pty_fd(head["target"])
        if fd is not None:
            if "rows" in head:
                self.resize(fd, head["rows"], head["cols"])
            view = memoryview(body)
            while view:
                try:
                    view = view[os.write(fd, view) :]
                except BlockingIOError:
                    select.select([], [fd], [], 1.0)

    def read_pty(self, fd: int) -> bool:
        try:
            data = os.read(fd, CHUNK)
        except BlockingIOError:
            return False
        except OSError:  # EIO: the terminal's last process is gone
            data = b""
        if not data:
            self.close_pty(fd)
            return False
        self.send({"id": self.ptys[fd], "out": True}, data)
        return True

    def close_pty(self, fd: int) -> None:
        self.poll.unregister(fd)
        os.close(fd)
        del self.ptys[fd]

    def op_ping(self, head: Head, body: bytes) -> None:
        self.send({"id": head["id"], "pid": os.getpid()})

    def op_read(self, head: Head, body: bytes) -> None:
        with AsAgent(), open(head["path"], "rb") as f:
            if os.fstat(f.fileno()).st_size > MAX_FRAME - HEAD_ROOM:
                raise OSError(errno.EFBIG, "file is larger than the frame limit", head["path"])
            data = f.read(MAX_FRAME - HEAD_ROOM + 1)
        self.send({"id": head["id"]}, data)

    def op_write(self, head: Head, body: bytes) -> None:
        with AsAgent():
            self.write(head, body)
        self.send({"id": head["id"]})

    def write(self, head: Head, body: bytes) -> None:
        path = head["path"]
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, head["mode"])
        try:
            view = memoryview(body)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, head["mode"] & 0o777)
        finally:
            os.close(fd)

    def op_upload(self, head: Head, body: bytes) -> None:
        import tarfile

        with AsAgent(), tarfile.open(fileobj=io.BytesIO(body)) as tar:
            check_members(tar, head["dest"])
            os.makedirs(head["dest"], exist_ok=True)
            tar.extractall(head["dest"])
        self.send({"id": head["id"]})

    def op_download(self, head: Head, body: bytes) -> None:
        import tarfile

        path = head["path"]
        if not os.path.exists(path):
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", path)
        out = io.BytesIO()
        with AsAgent(), tarfile.open(fileobj=out, mode="w") as tar:
            tar.add(path, arcname=os.path.basename(path.rstrip("/")) or ".")
        self.send({"id": head["id"]}, out.getvalue())

    def op_kill(self, head: Head, body: bytes) -> None:
        self.kill_all()
        self.send({"id": head["id"]})

    def op_reset(self, head: Head, body: bytes) -> None:
        self.kill_all()
        self.send({"id": head["id"]})

    def kill_all(self) -> None:
        """Kill every process but this server and the sandbox's init."""
        keep = {1, os.getpid()}
        for _ in range(200):
            pids = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in keep]
            alive = [p for p in pids if not _is_zombie(p)]
            if not alive:
                break
            for pid in alive:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.reap()
            time.sleep(0.002)
        self.reap()


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return True


if __name__ in ("__main__", "mfserver"):
    sys.stdout.flush()
    Server().run()

"""The exec server that lives inside every local sandbox.

The host sends this file's text into a fresh sandbox, where the host's
``python3`` runs it; from then on every command, file read or write and reset
is one framed request over the sandbox's stdin/stdout pipe, so no bubblewrap
process starts per command. It must stay standard-library only, start fast
(few imports) and never import MegaFlow. It comes in four parts, run in
one namespace in this order: ``server_jobs`` (the agent's identity,
commands, kill-all), ``server_spawner`` (the process that starts commands),
``server_files`` (file operations as the agent) and this module (framing,
the poll loop, requests and replies).

Frame: ``>II`` (header length, body length), a header dict in ``marshal``
format (version 4: plain types only, fast to load), then raw body bytes.
Requests carry an ``id``; replies echo it. Commands run each in their own
session (so a timeout kills the whole process group) with stdin on /dev/null.
They are forked by this server, or, with ``spawn`` as the server's fourth
argument (``MEGAFLOW_EXEC_MODE=spawn`` on the host), started by the spawner
(``server_spawner``) with ``posix_spawn``, except a request too large for
the spawner's socket, which is forked.

The server is uid 0 of the sandbox with only CAP_SETUID, CAP_SETGID and
CAP_KILL. Every command and terminal runs as the agent (uid and gid 1000, no
supplementary groups, no capabilities), and the file operations done for the
host run with the agent's effective ids, so neither can reach this process
(its pipe to the host, its signals) or anything the agent could not.
"""

from __future__ import annotations

import errno
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

    from megaflow.environment.local.server_files import pack, read_file, unpack, write_file
    from megaflow.environment.local.server_jobs import (
        HEAD_ROOM,
        INF,
        MAX_FRAME,
        Head,
        Job,
        exec_child,
        kill_all,
        pty_child,
        remove_ipc,
    )
    from megaflow.environment.local.server_spawner import SPAWN_WAIT_S, Spawner, SpawnerGone
else:
    import _signal as signal

HDR = struct.Struct(">II")
CHUNK = 65536
MARSHAL_VERSION = 4


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
        self.spawner = Spawner(self.devnull) if sys.argv[4:5] != ["fork"] else None
        self.spawner_fd = -1
        self.early: dict[int, int] = {}  # exits reported with the pid of an exec (fast commands)

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
                elif fd == self.spawner_fd:
                    self.read_spawner()
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
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            started = self.start_command(head, out_w, err_w)
        except BaseException:  # e.g. the pids limit is reached
            for fd in (out_r, err_r):
                os.close(fd)
            raise
        finally:
            os.close(out_w)
            os.close(err_w)
        if isinstance(started, str):  # as a forked child that cannot exec says it
            os.close(out_r)
            os.close(err_r)
            text = f"megaflow: cannot run {head['argv'][0]!r}: {started}\n".encode()
            self.send({"id": head["id"], "exit_code": 127, "stdout_len": 0, "truncated": False,
                       "timed_out": False, "duration_s": 0.0}, text)  # fmt: skip
            return
        pid = started
        timeout = head.get("timeout")
        deadline = time.monotonic() + timeout if timeout is not None else INF
        cap = min(head["cap"], (MAX_FRAME - HEAD_ROOM) // 2)  # both streams fit one frame
        job = Job(head["id"], pid, (out_r, err_r), cap, deadline)
        self.jobs[pid] = job
        for i, fd in enumerate(job.fds):
            os.set_blocking(fd, False)
            self.by_fd[fd] = (job, i)
            self.poll.register(fd, select.POLLIN)
        if pid in self.early:  # it exited before we knew its pid
            self.exited(pid, self.early.pop(pid))

    def start_command(self, head: Head, out_w: int, err_w: int) -> int | str:
        """Start the command: its pid, or why it cannot run. Only a request
        that never reached a live spawner is sent again (to a new one); one
        that did may have started."""
        sp = self.spawner
        for attempt in (1, 2):
            if sp is None:
                break
            if not sp.pid:
                self.spawner_fd = sp.start()
                self.poll.register(self.spawner_fd, select.POLLIN)
            try:
                sp.send(head["argv"], head["env"], head["cwd"], out_w, err_w)
            except SpawnerGone as e:
                self.spawner_gone(str(e))
                if attempt == 2:
                    raise OSError(errno.ECHILD, f"the command spawner {e}") from None
                continue
            except OSError as e:
                if e.errno != errno.EMSGSIZE:
                    raise
                break  # larger than the socket takes: a fork of ours runs it
            reply = self.spawner_reply()
            if isinstance(reply, int):
                return reply
            text, code = reply
            if code in (errno.EAGAIN, errno.ENOMEM):  # no room for a process, as a fork would fail
                raise OSError(code, os.strerror(code))
            return text
        pid = os.fork()
        if pid == 0:
            exec_child(head, self.devnull, out_w, err_w)
        return pid

    def spawner_reply(self) -> int | tuple[str, int]:
        """Wait for the spawner's answer to the request just sent (a pid, or why
        it could not start it and the errno), handling the exits it reports
        meanwhile. A spawner that dies, stops or does not answer in time is
        killed, and the exec fails: whether it started the command is unknown."""
        sp = self.spawner
        assert sp is not None
        assert sp.sock is not None
        deadline = time.monotonic() + SPAWN_WAIT_S
        answer: int | tuple[str, int] | None = None
        self.early.clear()
        try:
            while answer is None:
                if not select.select([sp.sock], [], [], 0.1)[0]:
                    if not sp.alive():
                        raise SpawnerGone("is gone (killed or stopped)")
                    if time.monotonic() > deadline:
                        raise SpawnerGone(f"did not answer within {SPAWN_WAIT_S} s")
                    continue
                for msg in sp.messages():
                    if msg[0] == "pid":
                        answer = msg[1]
                    elif msg[0] == "err":
                        answer = msg[1], msg[2]
                    elif msg[1] in self.jobs:
                        self.exited(msg[1], msg[2])
                    else:  # the new command's own exit, read with its pid
                        self.early[msg[1]] = msg[2]
                if answer is None and sp.closed:
                    raise SpawnerGone("exited")
        except SpawnerGone as e:
            self.spawner_gone(str(e))
            raise OSError(errno.ECHILD, f"the command spawner {e}") from None
        return answer

    def read_spawner(self) -> None:
        assert self.spawner is not None
        for msg in self.spawner.messages():
            if msg[0] == "exit":
                self.exited(msg[1], msg[2])
        if self.spawner.closed:
            self.spawner_gone("exited")

    def exited(self, pid: int, code: int) -> None:
        job = self.jobs.pop(pid, None)
        if job is not None:
            self.finish(job, code)

    def spawner_gone(self, why: str) -> None:
        """The spawner is dead or useless (``why``): kill it, take the exits it
        reported and start a new one at the next exec. Its commands run on as
        this server's children (it is their subreaper), which reaps them and
        reports their exit status as usual."""
        assert self.spawner is not None
        if self.spawner_fd >= 0:
            self.poll.unregister(self.spawner_fd)
            self.spawner_fd = -1
        for msg in self.spawner.stop():
            if msg[0] == "exit":
                self.exited(msg[1], msg[2])

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
        """Collect every exited child: commands, terminals, the spawner, and
        (as a subreaper, in spawn mode) any orphan of the agent's."""
        sp = self.spawner
        if sp is not None and sp.pid and not sp.alive():  # exited (now reaped) or stopped
            self.spawner_gone("was killed or stopped")
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if sp is not None and pid == sp.pid:
                sp.pid = 0  # reaped here, not by alive()
                self.spawner_gone("exited")
                continue
            job = self.jobs.pop(pid, None)
            if job is not None:
                self.finish(job, os.waitstatus_to_exitcode(status))
            rid = self.pty_pids.pop(pid, None)
            if rid is not None:
                fd = self.pty_fd(rid)
                while fd is not None and self.read_pty(fd):
                    pass
                if fd is not None and fd in self.ptys:
                    self.close_pty(fd)
                code = os.waitstatus_to_exitcode(status)
                self.send({"id": rid, "exit_code": 128 - code if code < 0 else code})

    def finish(self, job: Job, code: int) -> None:
        for fd in job.fds:  # what the command wrote before it exited is in the pipe
            if fd in self.by_fd:
                self.read_pipe(fd, budget=64)
                if fd in self.by_fd:
                    self.close_pipe(fd)
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
            pty_child(head)
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
        self.send({"id": head["id"]}, read_file(head["path"]))

    def op_write(self, head: Head, body: bytes) -> None:
        write_file(head["path"], head["mode"], body)
        self.send({"id": head["id"]})

    def op_upload(self, head: Head, body: bytes) -> None:
        unpack(head["dest"], body)
        self.send({"id": head["id"]})

    def op_download(self, head: Head, body: bytes) -> None:
        self.send({"id": head["id"]}, pack(head["path"]))

    def op_kill(self, head: Head, body: bytes) -> None:
        kill_all(self.reap)
        self.send({"id": head["id"]})

    def op_reset(self, head: Head, body: bytes) -> None:
        """Kill every process, then remove what outlives processes in the
        sandbox's IPC namespace; the host restores the files afterwards."""
        kill_all(self.reap)
        self.send({"id": head["id"], "ipc_removed": remove_ipc()})


if __name__ in ("__main__", "mfserver"):
    sys.stdout.flush()
    Server().run()

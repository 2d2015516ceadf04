"""The exec server's commands: start them, collect their output, report their end.

Fourth of the exec server's parts (see ``server``'s docstring for all of
them). A command runs in its own session (so a timeout kills its whole
process group) with stdin on /dev/null and the read ends of its stdout and
stderr pipes kept here. It is started by the spawner (``server_spawner``,
the default) or, with ``fork`` as the server's fourth argument
(``MEGAFLOW_EXEC_MODE=fork`` on the host) or for a request too large for the
spawner's socket, forked by the server. Each stream is capped so that both,
and the reply's header, fit one frame.
"""

from __future__ import annotations

import errno
import os
import select
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from collections.abc import Callable

    from megaflow.environment.local.server_jobs import (
        CHUNK,
        HEAD_ROOM,
        INF,
        MAX_FRAME,
        Head,
        Job,
        exec_child,
    )
    from megaflow.environment.local.server_spawner import SPAWN_WAIT_S, Spawner, SpawnerGone
else:
    import _signal as signal


INSIDE_CAUSES = (errno.EAGAIN, errno.ENOMEM, errno.ECHILD)
"""Why a command could not start that only the sandbox's own processes can
cause: they filled its pids or memory limit (``EAGAIN``, ``ENOMEM``), or
killed or stopped the spawner, which runs with their uid, before it reported
the command (``ECHILD``). Such an exec ends as the command's failure (exit
126 and the reason on stderr), never as the sandbox's: an agent must not be
able to turn its sample into an infrastructure error that is retried."""


class Commands:
    """The running commands of one exec server, by pid and by pipe fd.

    ``send`` writes a reply frame to the host; ``poll`` is the server's, on
    which each command's pipes (and the spawner's socket) are registered."""

    def __init__(
        self, send: Callable[..., None], poll: select.poll, devnull: int, spawn: bool
    ) -> None:
        self.send = send
        self.poll = poll
        self.devnull = devnull
        self.jobs: dict[int, Job] = {}  # by pid
        self.by_fd: dict[int, tuple[Job, int]] = {}
        self.spawner = Spawner(devnull) if spawn else None
        self.spawner_fd = -1
        self.early: dict[int, int] = {}  # exits reported with the pid of an exec (fast commands)

    def next_deadline(self) -> float | None:
        """When the next command runs out of time, if any has a timeout."""
        deadlines = [j.deadline for j in self.jobs.values() if not j.timed_out and j.deadline < INF]
        return min(deadlines) if deadlines else None

    def on_fd(self, fd: int) -> bool:
        """Handle a readable fd if it is one of ours (a pipe, the spawner's socket)."""
        if fd in self.by_fd:
            self.read_pipe(fd)
        elif fd == self.spawner_fd:
            self.read_spawner()
        else:
            return False
        return True

    def op_exec(self, head: Head, body: bytes) -> None:
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        started: int | str
        code = 127
        try:
            started = self.start_command(head, out_w, err_w)
        except OSError as e:
            if e.errno not in INSIDE_CAUSES:
                for fd in (out_r, err_r):
                    os.close(fd)
                raise
            started, code = e.strerror or str(e), 126
        except BaseException:
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
            self.send({"id": head["id"], "exit_code": code, "stdout_len": 0, "truncated": False,
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
                self.spawner_gone()
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
            self.spawner_gone()
            raise OSError(errno.ECHILD, f"the command spawner {e}") from None
        return answer

    def read_spawner(self) -> None:
        assert self.spawner is not None
        for msg in self.spawner.messages():
            if msg[0] == "exit":
                self.exited(msg[1], msg[2])
        if self.spawner.closed:
            self.spawner_gone()

    def check_spawner(self) -> None:
        """After a SIGCHLD: a spawner that exited (now reaped) or stopped is gone."""
        sp = self.spawner
        if sp is not None and sp.pid and not sp.alive():
            self.spawner_gone()

    def spawner_gone(self) -> None:
        """The spawner is dead or useless: kill it, take the exits it reported
        and start a new one at the next exec. Its commands run on as this
        server's children (it is their subreaper), which reaps them and
        reports their exit status as usual."""
        assert self.spawner is not None
        if self.spawner_fd >= 0:
            self.poll.unregister(self.spawner_fd)
            self.spawner_fd = -1
        for msg in self.spawner.stop():
            if msg[0] == "exit":
                self.exited(msg[1], msg[2])

    def reaped(self, pid: int, status: int) -> bool:
        """The server reaped ``pid``: whether it was a command or the spawner."""
        sp = self.spawner
        if sp is not None and pid == sp.pid:
            sp.pid = 0  # reaped already, not by alive()
            self.spawner_gone()
            return True
        job = self.jobs.pop(pid, None)
        if job is not None:
            self.finish(job, os.waitstatus_to_exitcode(status))
        return job is not None

    def exited(self, pid: int, code: int) -> None:
        job = self.jobs.pop(pid, None)
        if job is not None:
            self.finish(job, code)

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

"""The exec server that lives inside every local sandbox.

The host sends this program into a fresh sandbox, where the host's
``python3`` runs it; from then on every command, file read or write and reset
is one framed request over the sandbox's stdin/stdout pipe, so no bubblewrap
process starts per command. It must stay standard-library only, start fast
(few imports) and never import MegaFlow. It comes in six parts, run in one
namespace in this order (``launcher.SERVER_PARTS``):

- ``server_jobs``: the agent's identity, a command's forked child, the
  :class:`Job` record, kill-all and the IPC clean-up;
- ``server_spawner``: the process that starts commands with ``posix_spawn``;
- ``server_files``: file operations, done as the agent;
- ``server_commands``: starting commands, their output, their exit;
- ``server_terminals``: commands on a pty;
- this module: framing, the poll loop, dispatching requests, reaping.

Frame: ``>II`` (header length, body length), a header dict in ``marshal``
format (version 4: plain types only, fast to load), then raw body bytes.
Requests carry an ``id``; replies echo it. Commands are started by the
spawner unless the server's fourth argument is ``fork``
(``MEGAFLOW_EXEC_MODE=fork`` on the host); then the server forks each one.

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

    from megaflow.environment.local.server_commands import Commands
    from megaflow.environment.local.server_files import pack, read_file, unpack, write_file
    from megaflow.environment.local.server_jobs import MAX_FRAME, Head, kill_all, remove_ipc
    from megaflow.environment.local.server_terminals import Terminals
else:
    import _signal as signal

HDR = struct.Struct(">II")
MARSHAL_VERSION = 4


class Server:
    def __init__(self) -> None:
        self.inbuf = bytearray()
        self.poll = select.poll()
        self.wake_r, wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        devnull = os.open("/dev/null", os.O_RDONLY)
        self.commands = Commands(self.send, self.poll, devnull, sys.argv[4:5] != ["fork"])
        self.terminals = Terminals(self.send, self.poll)
        self.ops = {
            "exec": self.commands.op_exec, "pty": self.terminals.op_pty,
            "pty_in": self.terminals.op_pty_in, "ping": self.op_ping, "read": self.op_read,
            "write": self.op_write, "upload": self.op_upload, "download": self.op_download,
            "kill": self.op_kill, "reset": self.op_reset,
        }  # fmt: skip

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
            deadline = self.commands.next_deadline()
            wait = None if deadline is None else max(deadline - time.monotonic(), 0) * 1000 + 1
            asked = False
            for fd, _ in self.poll.poll(wait):
                if fd == 0:
                    data = os.read(0, 1 << 20)
                    if not data:
                        return
                    self.inbuf += data
                    asked = True
                elif fd == self.wake_r:
                    self.drain_wake()
                elif not self.commands.on_fd(fd):
                    self.terminals.on_fd(fd)
            # Reap first: what died before the host asked (a timed-out command's
            # group, orphans this subreaper took) is gone when a request runs.
            self.reap()
            self.commands.kill_late()
            if asked:
                self.dispatch()

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
                op = self.ops.get(head["op"])
                if op is None:
                    raise ValueError(f"unknown request {head['op']!r}")
                op(head, body)
            except Exception as e:  # a bad request must not kill the server
                if head.get("noreply"):
                    continue
                if isinstance(e, OSError):
                    error, code = e.strerror or str(e), e.errno or 0
                else:
                    error, code = f"{type(e).__name__}: {e}", 0
                self.send({"id": head["id"], "error": error, "errno": code})

    def reap(self) -> None:
        """Collect every exited child: commands, terminals, the spawner, and
        (its subreaper once the spawner ran) any orphan of the agent's."""
        self.commands.check_spawner()
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if not self.commands.reaped(pid, status):
                self.terminals.reaped(pid, status)

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

"""The exec server's terminals: a command on a pty, its output streamed as frames.

Fifth of the exec server's parts (see ``server``'s docstring for all of
them). ``open_terminal`` on the host is one ``pty`` request; the command is
forked with ``forkpty`` and runs as the agent (``pty_child``). Keystrokes and
resizes come as ``pty_in`` notifications; output goes back as frames with
the request's id and ``out`` set, and the exit code as the last frame.
"""

from __future__ import annotations

import os
import select
import struct

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from megaflow.environment.local.server_jobs import CHUNK, Head, pty_child


class Terminals:
    """The open terminals of one exec server. ``send`` writes a frame to the
    host; ``poll`` is the server's, on which each terminal's fd is registered."""

    def __init__(self, send: Callable[..., None], poll: select.poll) -> None:
        self.send = send
        self.poll = poll
        self.ptys: dict[int, int] = {}  # open terminal fd -> request id
        self.pty_pids: dict[int, int] = {}  # terminal process pid -> request id

    def on_fd(self, fd: int) -> bool:
        """Handle a readable fd if it is one of our terminals."""
        if fd not in self.ptys:
            return False
        self.read_pty(fd)
        return True

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

    def reaped(self, pid: int, status: int) -> bool:
        """The server reaped ``pid``: if it was a terminal's process, send what
        is left of its output, then its exit code."""
        rid = self.pty_pids.pop(pid, None)
        if rid is None:
            return False
        fd = self.pty_fd(rid)
        while fd is not None and self.read_pty(fd):
            pass
        if fd is not None and fd in self.ptys:
            self.close_pty(fd)
        code = os.waitstatus_to_exitcode(status)
        self.send({"id": rid, "exit_code": 128 - code if code < 0 else code})
        return True

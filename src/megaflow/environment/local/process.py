"""One sandbox's bubblewrap as a child process of the event loop, watched by a pidfd.

asyncio's subprocesses are watched, on Python 3.11, by one thread per child
(``ThreadedChildWatcher``): a thousand live sandboxes were a thousand threads,
and every start held the event loop until its new thread had been scheduled,
which at a thousand runnable sandboxes took long enough to stall the loop for
seconds during a ramp-up. Here :class:`subprocess.Popen` starts the process as
before (``close_fds``: only the passed descriptors reach bubblewrap), but on a
worker of the default thread pool rather than on the event loop; its pipes
become asyncio streams, and its exit is a pidfd that turns readable on the
event loop: no thread lives as long as a sandbox, and signals go through the
pidfd, so a recycled pid is never hit.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from typing import IO


class Bwrap:
    """A started bubblewrap: its pid, its stdin and stdout as streams, its exit."""

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        stdin: asyncio.StreamWriter,
        stdout: asyncio.StreamReader,
        stdout_pipe: asyncio.BaseTransport,
        pidfd: int,
    ) -> None:
        self._popen = popen
        self.pid = popen.pid
        self.stdin = stdin
        self.stdout = stdout
        self._stdout_pipe = stdout_pipe
        self._pidfd: int | None = pidfd
        self._exit: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().add_reader(pidfd, self._reap)

    @classmethod
    async def start_bwrap(
        cls,
        argv: list[str],
        stderr: IO[bytes],
        pass_fds: list[int],
        env: dict[str, str],
        limit: int,
    ) -> Bwrap:
        """Start ``argv`` with only ``env`` in its environment, stdin and stdout
        as pipes. Cancelled meanwhile, it still waits for the process and kills it."""
        work = asyncio.ensure_future(asyncio.to_thread(_popen_bwrap, argv, stderr, pass_fds, env))
        try:
            popen, pidfd = await asyncio.shield(work)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                popen, pidfd = await work
                os.close(pidfd)
                _kill(popen)
            raise
        assert popen.stdin is not None
        assert popen.stdout is not None
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=limit, loop=loop)
        pipes: list[asyncio.BaseTransport] = []
        try:
            out, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader, loop=loop), popen.stdout
            )
            pipes.append(out)
            into, protocol = await loop.connect_write_pipe(
                lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader(loop=loop), loop=loop),
                popen.stdin,
            )
        except BaseException:
            for pipe in pipes:
                pipe.close()
            os.close(pidfd)
            _kill(popen)
            raise
        writer = asyncio.StreamWriter(into, protocol, None, loop)
        return cls(popen, writer, reader, out, pidfd)

    @property
    def returncode(self) -> int | None:
        return self._exit.result() if self._exit.done() else None

    def _reap(self) -> None:
        """The pidfd is readable: the process has exited. Collect its status."""
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere: its status is lost
            pid, status = self.pid, 255 << 8
        if pid == 0:
            return
        code = os.waitstatus_to_exitcode(status)
        self._popen.returncode = code  # Popen must not reap or warn about it later
        self._close_pidfd()
        if not self._exit.done():
            self._exit.set_result(code)

    def _close_pidfd(self) -> None:
        if self._pidfd is not None:
            asyncio.get_running_loop().remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None

    def send_signal(self, sig: int) -> None:
        """Signal the process; ProcessLookupError once it has exited."""
        if self._pidfd is None:
            raise ProcessLookupError(self.pid)
        signal.pidfd_send_signal(self._pidfd, sig)

    async def wait(self) -> int:
        return await asyncio.shield(self._exit)

    def close(self) -> None:
        """Close the pipes (the process itself is waited for by :meth:`wait`)."""
        if not self.stdin.is_closing():
            self.stdin.close()
        self._stdout_pipe.close()


def _popen_bwrap(
    argv: list[str], stderr: IO[bytes], pass_fds: list[int], env: dict[str, str]
) -> tuple[subprocess.Popen[bytes], int]:
    """Blocking: the process and its pidfd. On a worker thread: Popen waits
    until the vfork'ed child has exec'd, 2 ms on average and up to 60 ms
    with the cores busy, and it lets go of the GIL meanwhile, so the event
    loop goes on."""
    popen = subprocess.Popen(
        argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
        pass_fds=pass_fds,
    )  # fmt: skip
    try:
        return popen, os.pidfd_open(popen.pid)
    except OSError:  # it cannot be watched: do not leave it running
        _kill(popen)
        raise


def _kill(popen: subprocess.Popen[bytes]) -> None:
    """Kill and reap a process that never became a :class:`Bwrap`, close its pipes."""
    popen.kill()
    popen.wait()
    for pipe in (popen.stdin, popen.stdout):
        if pipe is not None:
            pipe.close()

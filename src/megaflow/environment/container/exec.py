"""Running commands in a container through the Docker API exec endpoints.

How a command runs, and how a timeout kills all of it:

* Every exec is tagged with a unique ``MEGAFLOW_EXEC_ID`` environment
  variable. The engine (runc) starts each exec as the leader of a new session
  and process group, and children inherit the variable.
* The output is read on the host from the exec's multiplexed stream; bytes
  past the cap are read and dropped, so a flood cannot fill memory and the
  command is not blocked on a full pipe. The stream is read through the
  buffered reader the HTTP response's headers came through, never the socket
  beneath it: a command that writes and exits at once can have its frames
  arrive with the headers, and they then sit in that buffer (the Docker SDK's
  own readers take the bare socket and lose them: an empty output with exit 0,
  about 1 exec in 300 on a loaded Podman). A stream that ends inside a frame,
  or an exec the engine says ended without an exit code, raises
  :class:`IncompleteExec`: output or status that cannot be read whole is an
  error, never a quiet exit 0.
* On timeout the host starts a *second* exec running :data:`KILL_SCRIPT`: it
  SIGKILLs every process carrying the tag, and each one's process group.
  The keeper process (the container's main process) and PID 1 are spared.
  The same script without a tag kills every process but those two; ``reset``
  uses it, then empties ``/tmp`` and restores the workspace snapshot taken
  right after setup (a tar kept in the container, outside the workspace).

The scripts need only a POSIX shell, ``grep``, ``tar`` and ``find`` in the
image (busybox is enough).
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from docker.errors import DockerException
from docker.errors import NotFound as DockerNotFound

from megaflow.core.errors import SandboxError
from megaflow.environment.container.scripts import EXEC_TAG, KILL_SCRIPT

if TYPE_CHECKING:
    from megaflow.environment.container.engine import Engine


@dataclass
class Output:
    """Capped stdout and stderr of one exec."""

    cap: int
    out: bytearray = field(default_factory=bytearray)
    err: bytearray = field(default_factory=bytearray)
    truncated: bool = False

    def take(self, stream: int, data: bytes) -> None:
        buf = self.err if stream == 2 else self.out
        room = self.cap - len(buf)
        if len(data) > room:
            self.truncated = True
            data = data[: max(room, 0)]
        buf += data


class IncompleteExec(SandboxError):
    """An exec's output or exit status could not be read whole."""


FRAME_HEADER = struct.Struct(">BxxxL")  # stream (0 stdin, 1 stdout, 2 stderr), size
READ_CHUNK = 1 << 16


def drain(reader: Any, output: Output) -> None:
    """Read an exec's multiplexed stream until it ends (blocking).

    ``reader`` is a buffered binary file (its ``read`` returns short only at
    the end). Raises :class:`IncompleteExec` when the stream ends inside a
    frame or is not a multiplexed stream.
    """
    while True:
        head = reader.read(FRAME_HEADER.size)
        if not head:
            return
        if len(head) < FRAME_HEADER.size:
            raise IncompleteExec(f"the output stream ended inside a frame header ({head!r})")
        stream, size = FRAME_HEADER.unpack(head)
        if stream > 2:
            raise IncompleteExec(f"the output stream is not multiplexed (header {head!r})")
        while size:
            data = reader.read1(min(size, READ_CHUNK))
            if not data:
                raise IncompleteExec(f"the output stream ended {size} bytes short of a frame")
            size -= len(data)
            output.take(stream, data)


def no_timeout(sock: Any) -> None:
    """A long quiet command must not hit the API client's read timeout."""
    for s in (sock, getattr(sock, "_sock", None)):
        if s is not None and hasattr(s, "settimeout"):
            s.settimeout(None)


def abort(sock: Any) -> None:
    """Wake a thread blocked reading ``sock`` and close it."""
    raw = getattr(sock, "_sock", sock)
    try:
        raw.shutdown(socket.SHUT_RDWR)
    except (OSError, AttributeError):
        pass
    try:
        sock.close()
    except OSError:
        pass


# -- blocking engine calls, run on the runtime's threads ----------------------
def buffered_reader(sock: Any) -> Any:
    """The buffered file the exec's HTTP response headers were read through.

    It may already hold the first frames; reading ``sock`` (the socket under
    it) would skip them. The Docker SDK keeps the response on the socket it
    hands out (``_response``: urllib3's response, around http.client's, around
    that file)."""
    try:
        return sock._response.raw._fp.fp
    except AttributeError as e:
        raise IncompleteExec(
            f"cannot reach the buffered output stream of the exec ({type(sock).__name__}); "
            "the docker SDK version in use is not supported"
        ) from e


def start_exec(
    api: Any, container_id: str, argv: list[str], env: dict[str, str], workdir: str
) -> tuple[str, Any, Any]:
    """Create and start an exec: its id, its (never timing out) socket, and the
    buffered reader to read its output from."""
    eid: str = api.exec_create(container_id, argv, environment=env, workdir=workdir, stdin=False)[
        "Id"
    ]
    sock = api.exec_start(eid, socket=True)
    no_timeout(sock)
    try:
        return eid, sock, buffered_reader(sock)
    except IncompleteExec:
        abort(sock)
        raise


def exit_code(api: Any, eid: str, wait_s: float = 2.0) -> int | None:
    """The exit code once the engine has it (it can lag the end of the stream);
    None while the command still runs after ``wait_s``. Raises
    :class:`IncompleteExec` when the engine says the exec ended but gives no code."""
    deadline, pause = time.monotonic() + wait_s, 0.002
    while True:
        state = api.exec_inspect(eid)
        if not state.get("Running"):
            code = state.get("ExitCode")
            if code is None:
                raise IncompleteExec(f"exec {eid[:12]} ended, but the engine gives no exit code")
            return int(code)
        if time.monotonic() > deadline:
            return None
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def run_quiet(api: Any, container_id: str, argv: list[str]) -> int | None:
    """Run a short command, dropping its output; its exit code (None: unknown)."""
    eid, sock, reader = start_exec(api, container_id, argv, {}, "/")
    try:
        drain(reader, Output(4096))
    except IncompleteExec:
        pass  # the output is not wanted; the exit code says whether it worked
    finally:
        abort(sock)
    try:
        return exit_code(api, eid)
    except IncompleteExec:
        return None


# -- one command, and how a timeout kills all of it -------------------------
KILL_GRACE_S = 5.0  # after the kill exec, how long the stream may take to end
EXIT_WAIT_S = 60.0  # longest wait for an exit code after the stream, without a timeout


async def kill_container(engine: Engine, api: Any, container_id: str) -> None:
    try:
        await engine.run(api.kill, container_id, "KILL")
    except DockerException:
        pass


async def kill_exec(engine: Engine, api: Any, container_id: str, tag: str) -> None:
    """SIGKILL every process of one exec (tagged ``tag``; every process but the
    keeper and PID 1 for ``""``), and their process groups.

    The kill exec's short stream is read on a control thread, not a stream
    thread, so it runs even when every stream thread waits on a command
    that hangs. When the kill exec itself cannot run (a fork bomb holds
    every pid of the limit), the whole container is killed; ``reset``
    starts it again.
    """
    try:
        argv = ["/bin/sh", "-c", KILL_SCRIPT, tag]
        if await engine.run(run_quiet, api, container_id, argv) == 0:
            return
    except DockerNotFound:
        return  # the container is gone, and its processes with it
    except DockerException:
        pass
    await kill_container(engine, api, container_id)


async def run_command(
    engine: Engine,
    api: Any,
    container_id: str,
    argv: list[str],
    env: dict[str, str],
    workdir: str,
    timeout: float | None,
    output: Output,
) -> tuple[int | None, bool]:
    """Run ``argv`` as an exec, its output into ``output``: (exit code, timed out).

    The exit code is None when the command still ran past its time. Raises
    :class:`IncompleteExec` when the output stream was cut short or the
    engine gives no exit code for an exec that ended, and what the engine
    raises (``docker.errors.NotFound``, ``APIError``)."""
    tag = uuid.uuid4().hex
    started = time.monotonic()
    timed_out = False
    environment = {**env, EXEC_TAG: tag}
    eid, sock, stream = await engine.run(start_exec, api, container_id, argv, environment, workdir)
    reader = asyncio.ensure_future(engine.run_stream(drain, stream, output))
    try:  # asyncio.wait: the reader's own error is looked at below, after the kill
        if not (await asyncio.wait({reader}, timeout=timeout))[0]:
            timed_out = True
            await kill_exec(engine, api, container_id, tag)
            if not (await asyncio.wait({reader}, timeout=KILL_GRACE_S))[0]:
                await kill_container(engine, api, container_id)
                abort(sock)
    except asyncio.CancelledError:
        await asyncio.shield(kill_exec(engine, api, container_id, tag))
        abort(sock)
        raise
    finally:
        if not reader.done():
            abort(sock)
        await asyncio.gather(reader, return_exceptions=True)
        abort(sock)
    failure = None if timed_out else reader.exception()  # a timeout's kill cuts the stream
    if failure is not None:
        await kill_exec(engine, api, container_id, tag)  # what is left of it must not run on
        if isinstance(failure, IncompleteExec):
            raise failure
        raise IncompleteExec(f"reading the output stream failed: {failure!r}") from failure
    # The engine can report the exec running for a moment after its stream
    # ended (or the command closed its output and runs on); wait for the end,
    # within the timeout.
    left = EXIT_WAIT_S if timeout is None else max(timeout - (time.monotonic() - started), 0)
    code = await engine.run(exit_code, api, eid, max(left, 2.0))
    if code is None and not timed_out:  # still running past its time
        timed_out = True
        await kill_exec(engine, api, container_id, tag)
    return code, timed_out

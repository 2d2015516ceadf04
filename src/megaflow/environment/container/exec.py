"""Running commands in a container through the Docker API exec endpoints.

How a command runs, and how a timeout kills all of it:

* Every exec is tagged with a unique ``MEGAFLOW_EXEC_ID`` environment
  variable. The engine (runc) starts each exec as the leader of a new session
  and process group, and children inherit the variable.
* The output is read on the host from the exec's multiplexed stream; bytes
  past the cap are read and dropped, so a flood cannot fill memory and the
  command is not blocked on a full pipe.
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
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from docker.errors import DockerException
from docker.errors import NotFound as DockerNotFound
from docker.utils.socket import frames_iter

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


def drain(sock: Any, output: Output) -> None:
    """Read an exec's multiplexed stream until the command's end (blocking)."""
    for stream, data in frames_iter(sock, False):
        if data:
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
def start_exec(
    api: Any, container_id: str, argv: list[str], env: dict[str, str], workdir: str
) -> tuple[str, Any]:
    """Create and start an exec; its id and its (never timing out) output stream."""
    eid: str = api.exec_create(container_id, argv, environment=env, workdir=workdir, stdin=False)[
        "Id"
    ]
    sock = api.exec_start(eid, socket=True)
    no_timeout(sock)
    return eid, sock


def exit_code(api: Any, eid: str, wait_s: float = 2.0) -> int | None:
    """The exit code once the engine has it (it can lag the end of the stream)."""
    deadline, pause = time.monotonic() + wait_s, 0.002
    while True:
        state = api.exec_inspect(eid)
        if not state.get("Running"):
            code = state.get("ExitCode")
            return int(code) if code is not None else None
        if time.monotonic() > deadline:
            return None
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def run_quiet(api: Any, container_id: str, argv: list[str]) -> int | None:
    """Run a short command, dropping its output; its exit code."""
    eid, sock = start_exec(api, container_id, argv, {}, "/")
    try:
        drain(sock, Output(4096))
    finally:
        abort(sock)
    return exit_code(api, eid)


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

    The exit code is None when the engine never reported one. Raises what the
    engine raises (``docker.errors.NotFound``, ``APIError``)."""
    tag = uuid.uuid4().hex
    started = time.monotonic()
    timed_out = False
    environment = {**env, EXEC_TAG: tag}
    eid, sock = await engine.run(start_exec, api, container_id, argv, environment, workdir)
    reader = asyncio.ensure_future(engine.run_stream(drain, sock, output))
    try:
        await asyncio.wait_for(asyncio.shield(reader), timeout)
    except TimeoutError:
        timed_out = True
        await kill_exec(engine, api, container_id, tag)
        try:
            await asyncio.wait_for(asyncio.shield(reader), KILL_GRACE_S)
        except TimeoutError:
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
    # The stream can end before the command does (an attach cut short under
    # load); wait for the engine to see the end, within the timeout.
    left = EXIT_WAIT_S if timeout is None else max(timeout - (time.monotonic() - started), 0)
    code = await engine.run(exit_code, api, eid, max(left, 2.0))
    if code is None and not timed_out:  # still running past its time
        timed_out = True
        await kill_exec(engine, api, container_id, tag)
    return code, timed_out

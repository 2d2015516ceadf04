"""SWE-ReX's runtime interface over a MegaFlow sandbox.

:class:`SandboxRuntime` is a ``swerex.runtime.abstract.AbstractRuntime``:
whatever drives SWE-ReX runtimes (SWE-agent's ``SWEEnv``, or a script using
SWE-ReX directly) works with it unchanged, and every command runs through the
sandbox's own ``exec``, so on any MegaFlow runtime (local, container, over
gRPC) with its isolation, limits and teardown. Bash sessions are in
``session.py``; ``execute``, ``read_file``, ``write_file`` and ``upload`` map
onto the sandbox's calls one to one.

A sandbox's channel belongs to the event loop it was created on, while
SWE-agent wraps every call in its own ``asyncio.run``: a call arriving on
another loop is handed to the runtime's home loop (which must be running, in
another thread) and awaited from there. Needs the ``agents`` extra.
"""

from __future__ import annotations

import asyncio
import functools
import io
import logging
import posixpath
import tarfile
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from swerex.exceptions import (
    CommandTimeoutError,
    NonZeroExitCodeError,
    SessionDoesNotExistError,
    SessionExistsError,
)
from swerex.runtime.abstract import (
    AbstractRuntime,
    Action,
    BashAction,
    CloseBashSessionRequest,
    CloseBashSessionResponse,
    CloseResponse,
    CloseSessionRequest,
    CloseSessionResponse,
    Command,
    CommandResponse,
    CreateBashSessionRequest,
    CreateSessionRequest,
    CreateSessionResponse,
    IsAliveResponse,
    Observation,
    ReadFileRequest,
    ReadFileResponse,
    UploadRequest,
    UploadResponse,
    WriteFileRequest,
    WriteFileResponse,
)

from megaflow.core.errors import MegaFlowError, NotFound
from megaflow.environment.abstract import Sandbox, shell_argv
from megaflow.environment.swerex.session import ShellSession, script

STATE_DIR = "/tmp/.megaflow-swerex"
"""Where in the sandbox sessions keep their FIFOs and command files."""

P = ParamSpec("P")
R = TypeVar("R")


class HasHomeLoop(Protocol):
    home_loop: asyncio.AbstractEventLoop | None


S = TypeVar("S", bound=HasHomeLoop)


def running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def on_home_loop(
    fn: Callable[Concatenate[S, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """Run the method on ``self.home_loop`` when called from another loop."""

    @functools.wraps(fn)
    async def wrapper(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        home = self.home_loop
        if home is None or home is asyncio.get_running_loop():
            return await fn(self, *args, **kwargs)
        if not home.is_running():
            raise RuntimeError("the sandbox's event loop is not running; call from it")
        future = asyncio.run_coroutine_threadsafe(fn(self, *args, **kwargs), home)
        return await asyncio.wrap_future(future)

    return wrapper


class SandboxRuntime(AbstractRuntime):
    """A SWE-ReX runtime whose commands run in ``sandbox``.

    The sandbox stays the caller's: :meth:`close` ends the sessions, not the
    sandbox (``SandboxDeployment`` owns one when it created it).
    """

    def __init__(
        self, sandbox: Sandbox, *, state_dir: str = STATE_DIR, logger: logging.Logger | None = None
    ) -> None:
        self.sandbox = sandbox
        self.state_dir = state_dir
        self.logger = logger or logging.getLogger("megaflow.swerex")
        self.sessions: dict[str, ShellSession] = {}
        self._started = 0
        self.home_loop = running_loop()
        """The loop the sandbox lives on (None: whichever loop calls)."""

    @on_home_loop
    async def is_alive(self, *, timeout: float | None = None) -> IsAliveResponse:
        try:
            res = await self.sandbox.exec(["true"], timeout=timeout or 10.0)
        except MegaFlowError as e:
            return IsAliveResponse(is_alive=False, message=f"sandbox {self.sandbox.id}: {e}")
        if not res.ok:
            msg = f"sandbox {self.sandbox.id}: `true` exited {res.exit_code}"
            return IsAliveResponse(is_alive=False, message=msg)
        return IsAliveResponse(is_alive=True)

    @on_home_loop
    async def create_session(self, request: CreateSessionRequest) -> CreateSessionResponse:
        if request.session in self.sessions:
            raise SessionExistsError(f"session {request.session} already exists")
        if not isinstance(request, CreateBashSessionRequest):
            raise ValueError(f"unknown session type: {request!r}")
        # Written each time: a reset sandbox has lost its /tmp.
        path = f"{self.state_dir}/session.sh"
        await self.sandbox.write_file(path, script().encode(), mode=0o755)
        self._started += 1
        session = ShellSession(self.sandbox, f"{self.state_dir}/{self._started}", path)
        response = await session.start(request)
        self.sessions[request.session] = session
        return response

    def _session(self, name: str) -> ShellSession:
        if name not in self.sessions:
            raise SessionDoesNotExistError(f"session {name!r} does not exist")
        return self.sessions[name]

    @on_home_loop
    async def run_in_session(self, action: Action) -> Observation:
        session = self._session(action.session)
        if isinstance(action, BashAction):
            return await session.run(action)
        return await session.interrupt(action)

    @on_home_loop
    async def close_session(self, request: CloseSessionRequest) -> CloseSessionResponse:
        await self._session(request.session).close()
        del self.sessions[request.session]
        return CloseBashSessionResponse()

    @on_home_loop
    async def execute(self, command: Command) -> CommandResponse:
        """A command in a fresh process, as ``subprocess.run`` would run it."""
        if command.shell:
            argv = (
                shell_argv(command.command)
                if isinstance(command.command, str)
                else [
                    "/bin/sh",
                    "-c",
                    *command.command,
                ]
            )
        else:
            argv = [command.command] if isinstance(command.command, str) else command.command
        if command.merge_output_streams:
            argv = ["/bin/sh", "-c", 'exec "$@" 2>&1', "sh", *argv]
        res = await self.sandbox.exec(
            argv, timeout=command.timeout, env=command.env, cwd=command.cwd
        )
        if res.timed_out:
            raise CommandTimeoutError(
                f"Timeout ({command.timeout}s) exceeded while running command {command.command!r}"
            )
        if command.check and res.exit_code != 0:
            msg = (
                f"Command {command.command!r} failed with exit code {res.exit_code}. "
                f"Stdout:\n{res.stdout!r}\nStderr:\n{res.stderr!r}"
            )
            raise NonZeroExitCodeError(f"{command.error_msg}: {msg}" if command.error_msg else msg)
        return CommandResponse(stdout=res.stdout, stderr=res.stderr, exit_code=res.exit_code)

    @on_home_loop
    async def read_file(self, request: ReadFileRequest) -> ReadFileResponse:
        try:
            data = await self.sandbox.read_file(request.path)
        except NotFound as e:
            raise FileNotFoundError(
                f"No such file in sandbox {self.sandbox.id}: {request.path}"
            ) from e
        content = data.decode(request.encoding or "utf-8", request.errors or "strict")
        return ReadFileResponse(content=content)

    @on_home_loop
    async def write_file(self, request: WriteFileRequest) -> WriteFileResponse:
        await self.sandbox.write_file(request.path, request.content.encode())
        return WriteFileResponse()

    @on_home_loop
    async def upload(self, request: UploadRequest) -> UploadResponse:
        """Copy a host file or directory into the sandbox, as ``shutil.copy``
        (into an existing directory, or to that name) or ``copytree`` would."""
        source = Path(request.source_path)
        is_file = await asyncio.to_thread(source.is_file)
        target = request.target_path
        if is_file:
            probe = await self.sandbox.exec(["test", "-d", target], timeout=10.0)
            if probe.exit_code == 0:
                target = posixpath.join(target, source.name)
        parent, name = posixpath.split(posixpath.normpath(target))
        archive = await asyncio.to_thread(_pack, source, name)
        await self.sandbox.upload(archive, parent or "/")
        return UploadResponse()

    @on_home_loop
    async def close(self) -> CloseResponse:
        for name in list(self.sessions):
            await self.close_session(CloseBashSessionRequest(session=name))
        return CloseResponse()

    def __repr__(self) -> str:
        return f"SandboxRuntime({self.sandbox.id!r})"


def _pack(source: Path, name: str) -> bytes:
    """``source`` (a file or directory) as a tar archive holding it as ``name``."""
    if not source.exists():
        raise FileNotFoundError(f"upload source {source} does not exist")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(source, arcname=name)
    return buf.getvalue()

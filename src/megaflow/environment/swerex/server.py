"""SWE-ReX's HTTP protocol, served on the host for one sandbox.

SWE-ReX's ``RemoteRuntime`` (and SWE-agent's ``remote`` deployment) talk to a
server that SWE-ReX normally runs inside the container. Here the server runs
on the host and answers every request through a :class:`SandboxRuntime`, so
nothing needs to be installed in the sandbox, and the sandbox keeps
``network: none``: the client talks to this server, the server to the
sandbox's exec channel. The routes, the ``X-API-Key`` header and the error
transfer (HTTP 511 with the exception's class path) are SWE-ReX's, so its
own client re-raises the same exceptions as against its own server.
"""

from __future__ import annotations

import asyncio
import hmac
import socket
import tempfile
import traceback
import zipfile
from pathlib import Path
from typing import Any

from fastapi import FastAPI, File, Form, Request, UploadFile
from fastapi.responses import JSONResponse
from swerex.runtime.abstract import (
    Action,
    CloseSessionRequest,
    Command,
    CreateSessionRequest,
    ReadFileRequest,
    UploadRequest,
    WriteFileRequest,
    _ExceptionTransfer,
)

from megaflow.core.errors import TransportError
from megaflow.core.lifecycle import Lifecycle
from megaflow.environment.swerex.runtime import SandboxRuntime


def _dump(model: Any) -> dict[str, Any]:
    out: dict[str, Any] = model.model_dump()
    return out


def _unzip(archive: Path, dest: Path) -> None:
    """Extract ``archive`` keeping each file's permission bits (an uploaded
    tool must stay executable), which ``ZipFile.extractall`` drops."""
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            path = Path(zf.extract(info, dest))
            mode = (info.external_attr >> 16) & 0o777
            if mode and not info.is_dir():
                path.chmod(mode)


def create_app(runtime: SandboxRuntime, auth_token: str) -> FastAPI:
    """A FastAPI app speaking SWE-ReX's protocol for ``runtime``."""
    app = FastAPI()
    upload_file = File(...)
    target_form = Form(...)
    unzip_form = Form(False)

    @app.middleware("http")
    async def authenticate(request: Request, call_next: Any) -> Any:
        given = request.headers.get("X-API-Key", "")
        if auth_token and not hmac.compare_digest(given.encode(), auth_token.encode()):
            return JSONResponse(status_code=401, content={"detail": "Invalid API Key"})
        return await call_next(request)

    @app.exception_handler(Exception)
    async def transfer(request: Request, exc: Exception) -> Any:
        sent = _ExceptionTransfer(
            message=str(exc),
            class_path=f"{type(exc).__module__}.{type(exc).__name__}",
            traceback="".join(traceback.format_exception(exc)),
            extra_info=getattr(exc, "extra_info", {}),
        )
        return JSONResponse(status_code=511, content={"swerexception": sent.model_dump()})

    @app.get("/")
    async def root() -> dict[str, str]:
        return {"message": "hello world"}

    @app.get("/is_alive")
    async def is_alive() -> dict[str, Any]:
        return _dump(await runtime.is_alive())

    @app.post("/create_session")
    async def create_session(request: CreateSessionRequest) -> dict[str, Any]:
        return _dump(await runtime.create_session(request))

    @app.post("/run_in_session")
    async def run_in_session(action: Action) -> dict[str, Any]:
        return _dump(await runtime.run_in_session(action))

    @app.post("/close_session")
    async def close_session(request: CloseSessionRequest) -> dict[str, Any]:
        return _dump(await runtime.close_session(request))

    @app.post("/execute")
    async def execute(command: Command) -> dict[str, Any]:
        return _dump(await runtime.execute(command))

    @app.post("/read_file")
    async def read_file(request: ReadFileRequest) -> dict[str, Any]:
        return _dump(await runtime.read_file(request))

    @app.post("/write_file")
    async def write_file(request: WriteFileRequest) -> dict[str, Any]:
        return _dump(await runtime.write_file(request))

    @app.post("/upload")
    async def upload(
        file: UploadFile = upload_file, target_path: str = target_form, unzip: bool = unzip_form
    ) -> dict[str, Any]:
        with tempfile.TemporaryDirectory() as tmp:
            name = Path(file.filename or "upload").name
            received = Path(tmp) / name
            received.write_bytes(await file.read())
            source = received
            if unzip:
                source = Path(tmp) / "unzipped"
                _unzip(received, source)
            request = UploadRequest(source_path=str(source), target_path=target_path)
            return _dump(await runtime.upload(request))

    @app.post("/close")
    async def close() -> dict[str, Any]:
        return _dump(await runtime.close())

    return app


class SwerexServer(Lifecycle):
    """Serves :func:`create_app` with uvicorn inside the running event loop.

    ``port=0`` picks a free port; ``url`` is what SWE-ReX's clients take as
    ``host`` and ``port``.
    """

    def __init__(
        self, runtime: SandboxRuntime, auth_token: str, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.runtime = runtime
        self.auth_token = auth_token
        self.host = host
        self.port = port
        self._server: Any = None
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            create_app(self.runtime, self.auth_token),
            log_level="warning",
            lifespan="off",
            access_log=False,
        )
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        while not self._server.started:
            if self._task.done():
                self._task.result()
                raise TransportError(f"SWE-ReX server on {self.url} stopped at start")
            await asyncio.sleep(0.01)

    async def serve_forever(self) -> None:
        if self._task is not None:
            await self._task

    async def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._task is not None:
            await self._task
        self._server = self._task = None

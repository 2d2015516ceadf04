"""A :class:`Runtime` whose sandboxes live behind a remote Environment Service.

``GrpcRuntime`` and ``GrpcSandbox`` implement the same interface as every
local runtime, so callers cannot tell them apart::

    async with GrpcRuntime("10.0.0.5:20052", token) as runtime:
        async with await runtime.create(EnvironmentSpec()) as sb:
            print((await sb.exec("echo hi")).stdout)

Errors come back as the MegaFlow error the server raised (``NotFound``,
``InvalidInput``, ``SandboxStartError`` ...); an unreachable service raises
``TransportError``, a wrong token ``AuthError``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from megaflow.core.errors import InvalidInput
from megaflow.environment.abstract import (
    DEFAULT_OUTPUT_CAP,
    EnvironmentSpec,
    ExecResult,
    Runtime,
    Sandbox,
    SandboxInfo,
    SandboxStats,
)
from megaflow.rpc import environment_codec as codec
from megaflow.rpc.client import GrpcClient
from megaflow.rpc.config import TlsConfig
from megaflow.rpc.environment_server import DEFAULT_CHUNK, chunks
from megaflow.rpc.gen import common_pb2, environment_pb2_grpc
from megaflow.rpc.gen import environment_pb2 as pb
from megaflow.rpc.server import DEFAULT_KEEPALIVE_S, DEFAULT_MAX_MESSAGE

OnOutput = Callable[[str, bytes], None]


class GrpcSandbox(Sandbox):
    def __init__(self, info: SandboxInfo, runtime: GrpcRuntime) -> None:
        self.info = info
        self._rt = runtime

    async def exec(
        self,
        command: str | list[str],
        timeout: float | None = 60.0,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        output_cap: int = DEFAULT_OUTPUT_CAP,
    ) -> ExecResult:
        req = codec.exec_request(self.id, command, timeout, env, cwd, output_cap)
        reply = await self._rt.call("Exec", lambda s, md: s.Exec(req, metadata=md))
        return codec.result_from_pb(reply)

    async def exec_stream(
        self,
        command: str | list[str],
        on_output: OnOutput,
        timeout: float | None = 60.0,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        output_cap: int = DEFAULT_OUTPUT_CAP,
        chunk_size: int = 0,
    ) -> ExecResult:
        """Like :meth:`exec`, but output arrives in chunks through ``on_output(stream, data)``
        (``stream`` is ``"stdout"`` or ``"stderr"``), so it may exceed the message size
        limit. The returned result has empty ``stdout`` and ``stderr``."""
        req = codec.exec_request(self.id, command, timeout, env, cwd, output_cap, chunk_size)

        async def go(stub: Any, md: Any) -> ExecResult:
            final: ExecResult | None = None
            async for event in stub.ExecStream(req, metadata=md):
                kind = event.WhichOneof("event")
                if kind in ("stdout", "stderr"):
                    on_output(kind, getattr(event, kind))
                elif kind == "finished":
                    final = codec.result_from_pb(event.finished)
            if final is None:
                raise InvalidInput(f"sandbox {self.id}: exec stream ended without a status")
            return final

        return await self._rt.call("ExecStream", go)

    async def _pull(self, method: str, path: str) -> bytes:
        req = pb.FileRequest(sandbox_id=self.id, path=path)

        async def go(stub: Any, md: Any) -> bytes:
            return b"".join([c.data async for c in getattr(stub, method)(req, metadata=md)])

        return await self._rt.call(method, go)

    async def read_file(self, path: str) -> bytes:
        return await self._pull("ReadFile", path)

    async def download(self, path: str) -> bytes:
        return await self._pull("Download", path)

    async def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        size = self._rt.chunk_size

        async def messages() -> AsyncIterator[pb.WriteFileChunk]:
            for i, piece in enumerate(chunks(data, size)):
                if i == 0:
                    yield pb.WriteFileChunk(sandbox_id=self.id, path=path, mode=mode, data=piece)
                else:
                    yield pb.WriteFileChunk(data=piece)

        await self._rt.call("WriteFile", lambda s, md: s.WriteFile(messages(), metadata=md))

    async def upload(self, tar_stream: bytes, dest: str) -> None:
        size = self._rt.chunk_size

        async def messages() -> AsyncIterator[pb.UploadChunk]:
            for i, piece in enumerate(chunks(tar_stream, size)):
                if i == 0:
                    yield pb.UploadChunk(sandbox_id=self.id, dest=dest, data=piece)
                else:
                    yield pb.UploadChunk(data=piece)

        await self._rt.call("Upload", lambda s, md: s.Upload(messages(), metadata=md))

    async def reset(self) -> None:
        ref = pb.SandboxRef(sandbox_id=self.id)
        await self._rt.call("Reset", lambda s, md: s.Reset(ref, metadata=md))

    async def kill_processes(self) -> None:
        ref = pb.SandboxRef(sandbox_id=self.id)
        await self._rt.call("KillProcesses", lambda s, md: s.KillProcesses(ref, metadata=md))

    async def stats(self) -> SandboxStats:
        ref = pb.SandboxRef(sandbox_id=self.id)
        return codec.stats_from_pb(
            await self._rt.call("Stats", lambda s, md: s.Stats(ref, metadata=md))
        )

    async def destroy(self) -> None:
        await self._rt.destroy(self.id)


class GrpcRuntime(GrpcClient, Runtime):
    """Client of a remote Environment Service. ``stop`` destroys the sandboxes this
    client created and closes the channel; orphans are reaped by the server's runtime."""

    name = "grpc"
    service = "environment service"

    def __init__(
        self,
        target: str,
        token: str,
        tls: TlsConfig | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE,
        keepalive_s: float = DEFAULT_KEEPALIVE_S,
        chunk_size: int = DEFAULT_CHUNK,
    ) -> None:
        super().__init__(target, token, tls, max_message_bytes, keepalive_s)
        self.chunk_size = min(chunk_size, max_message_bytes // 2)
        self._created: set[str] = set()

    def new_stub(self, channel: grpc.aio.Channel) -> Any:
        return environment_pb2_grpc.EnvironmentStub(channel)  # type: ignore[no-untyped-call]

    async def stop(self) -> None:
        if self._channel is None:
            return
        try:
            for sandbox_id in list(self._created):
                await self.destroy(sandbox_id)
        finally:
            await super().stop()

    async def create(self, spec: EnvironmentSpec, owner: str | None = None) -> GrpcSandbox:
        req = pb.CreateSandboxRequest(spec=codec.spec_to_pb(spec), owner=owner)
        info = await self.call("CreateSandbox", lambda s, md: s.CreateSandbox(req, metadata=md))
        self._created.add(info.id)
        return GrpcSandbox(codec.info_from_pb(info), self)

    async def list(self) -> list[SandboxInfo]:
        reply = await self.call(
            "ListSandboxes", lambda s, md: s.ListSandboxes(common_pb2.Empty(), metadata=md)
        )
        return [codec.info_from_pb(i) for i in reply.sandboxes]

    async def destroy(self, sandbox_id: str) -> None:
        ref = pb.SandboxRef(sandbox_id=sandbox_id)
        await self.call("Destroy", lambda s, md: s.Destroy(ref, metadata=md))
        self._created.discard(sandbox_id)

    async def reap_orphans(self) -> int:
        """Always 0: the service's own runtime reaps what a crash left on its machine."""
        return 0

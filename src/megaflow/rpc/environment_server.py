"""The Environment Service over gRPC: wraps any :class:`Runtime`.

The servicer keeps the sandboxes it created by id, confines every file path
to the sandbox's workdir, and streams files, archives and long outputs in
chunks so no message outgrows the size limit. It does not own the runtime:
whoever built the runtime starts and stops it.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import grpc

from megaflow.core.errors import InvalidInput, NotFound, SandboxError
from megaflow.environment.abstract import DEFAULT_OUTPUT_CAP, Runtime, Sandbox
from megaflow.rpc import environment_codec as codec
from megaflow.rpc.gen import common_pb2, environment_pb2_grpc
from megaflow.rpc.gen import environment_pb2 as pb
from megaflow.rpc.paths import confine
from megaflow.rpc.status import handles_errors, streams_errors

DEFAULT_CHUNK = 1024 * 1024
MAX_CHUNK = 4 * 1024 * 1024
REMEMBER_DESTROYED = 10_000
MAX_UPLOAD = 2 * 1024 * 1024 * 1024  # bytes one WriteFile or Upload may carry
Ctx = Any  # grpc.aio.ServicerContext; grpc ships no type information


def chunks(data: bytes, size: int = DEFAULT_CHUNK) -> list[bytes]:
    """``data`` cut into pieces of at most ``size`` bytes (one empty piece for no data)."""
    return [data[i : i + size] for i in range(0, len(data), size)] or [b""]


@dataclass(slots=True)
class _Box:
    sandbox: Sandbox
    workdir: str


class EnvironmentServicer:
    """Serves one runtime's sandboxes. Register with ``RpcServer.add(servicer.register)``."""

    def __init__(self, runtime: Runtime, chunk_size: int = DEFAULT_CHUNK) -> None:
        self.runtime = runtime
        self.chunk_size = chunk_size
        self._boxes: dict[str, _Box] = {}
        # Recently destroyed ids answer like a destroyed local sandbox does.
        self._destroyed: OrderedDict[str, None] = OrderedDict()

    def register(self, server: grpc.aio.Server) -> None:
        environment_pb2_grpc.add_EnvironmentServicer_to_server(self, server)  # type: ignore[no-untyped-call]

    def _box(self, sandbox_id: str) -> _Box:
        box = self._boxes.get(sandbox_id)
        if box is None and sandbox_id in self._destroyed:
            raise SandboxError(f"sandbox {sandbox_id} is destroyed")
        if box is None:
            raise NotFound(f"no sandbox {sandbox_id!r} on this environment service")
        return box

    @handles_errors
    async def CreateSandbox(self, request: pb.CreateSandboxRequest, context: Ctx) -> pb.SandboxInfo:
        spec = codec.spec_from_pb(request.spec)
        owner = request.owner if request.HasField("owner") else None
        sandbox = await self.runtime.create(spec, owner=owner)
        self._boxes[sandbox.id] = _Box(sandbox, spec.workdir)
        return codec.info_to_pb(sandbox.info, spec.workdir)

    @handles_errors
    async def Exec(self, request: pb.ExecRequest, context: Ctx) -> pb.ExecResult:
        result = await self._run(request)
        return codec.result_to_pb(result)

    async def _run(self, request: pb.ExecRequest) -> Any:
        box = self._box(request.sandbox_id)
        if request.output_cap < 0:
            raise InvalidInput(f"output_cap must be >= 0, got {request.output_cap}")
        return await box.sandbox.exec(
            codec.exec_command(request),
            timeout=request.timeout if request.HasField("timeout") else None,
            env=dict(request.env) or None,
            cwd=request.cwd if request.HasField("cwd") else None,
            output_cap=request.output_cap or DEFAULT_OUTPUT_CAP,
        )

    @streams_errors
    async def ExecStream(
        self, request: pb.ExecRequest, context: Ctx
    ) -> AsyncIterator[pb.ExecEvent]:
        size = request.chunk_size or self.chunk_size
        if not 0 < size <= MAX_CHUNK:
            raise InvalidInput(f"chunk_size must be in 1..{MAX_CHUNK}, got {size}")
        self._box(request.sandbox_id)
        yield pb.ExecEvent(started=common_pb2.Empty())
        result = await self._run(request)
        for piece in chunks(result.stdout.encode(), size) if result.stdout else []:
            yield pb.ExecEvent(stdout=piece)
        for piece in chunks(result.stderr.encode(), size) if result.stderr else []:
            yield pb.ExecEvent(stderr=piece)
        final = result.model_copy(update={"stdout": "", "stderr": ""})
        yield pb.ExecEvent(finished=codec.result_to_pb(final))

    @streams_errors
    async def ReadFile(
        self, request: pb.FileRequest, context: Ctx
    ) -> AsyncIterator[common_pb2.Chunk]:
        box = self._box(request.sandbox_id)
        data = await box.sandbox.read_file(confine(request.path, box.workdir))
        for piece in chunks(data, self.chunk_size):
            yield common_pb2.Chunk(data=piece)

    @streams_errors
    async def Download(
        self, request: pb.FileRequest, context: Ctx
    ) -> AsyncIterator[common_pb2.Chunk]:
        box = self._box(request.sandbox_id)
        data = await box.sandbox.download(confine(request.path, box.workdir))
        for piece in chunks(data, self.chunk_size):
            yield common_pb2.Chunk(data=piece)

    async def _collect(self, stream: AsyncIterator[Any], what: str) -> tuple[Any, bytes]:
        first: Any = None
        parts: list[bytes] = []
        total = 0
        async for msg in stream:
            first = first or msg
            total += len(msg.data)
            if total > MAX_UPLOAD:
                raise InvalidInput(f"{what} is larger than {MAX_UPLOAD} bytes")
            parts.append(msg.data)
        if first is None:
            raise InvalidInput(f"{what}: the stream carried no message")
        return first, b"".join(parts)

    @handles_errors
    async def WriteFile(
        self, request_iterator: AsyncIterator[pb.WriteFileChunk], context: Ctx
    ) -> common_pb2.Empty:
        head, data = await self._collect(request_iterator, "WriteFile")
        box = self._box(head.sandbox_id)
        if not 0 <= head.mode <= 0o7777:
            raise InvalidInput(f"file mode {head.mode:o} is not a permission mode")
        path = confine(head.path, box.workdir)
        await box.sandbox.write_file(path, data, head.mode or 0o644)
        return common_pb2.Empty()

    @handles_errors
    async def Upload(
        self, request_iterator: AsyncIterator[pb.UploadChunk], context: Ctx
    ) -> common_pb2.Empty:
        head, data = await self._collect(request_iterator, "Upload")
        box = self._box(head.sandbox_id)
        await box.sandbox.upload(data, confine(head.dest or ".", box.workdir))
        return common_pb2.Empty()

    @handles_errors
    async def Reset(self, request: pb.SandboxRef, context: Ctx) -> common_pb2.Empty:
        await self._box(request.sandbox_id).sandbox.reset()
        return common_pb2.Empty()

    @handles_errors
    async def KillProcesses(self, request: pb.SandboxRef, context: Ctx) -> common_pb2.Empty:
        await self._box(request.sandbox_id).sandbox.kill_processes()
        return common_pb2.Empty()

    @handles_errors
    async def Stats(self, request: pb.SandboxRef, context: Ctx) -> pb.SandboxStats:
        return codec.stats_to_pb(await self._box(request.sandbox_id).sandbox.stats())

    @handles_errors
    async def ListSandboxes(self, request: common_pb2.Empty, context: Ctx) -> pb.SandboxList:
        infos = await self.runtime.list()
        out = pb.SandboxList()
        for info in infos:
            box = self._boxes.get(info.id)
            out.sandboxes.append(codec.info_to_pb(info, box.workdir if box else ""))
        return out

    @handles_errors
    async def Destroy(self, request: pb.SandboxRef, context: Ctx) -> common_pb2.Empty:
        if self._boxes.pop(request.sandbox_id, None) is not None:
            self._destroyed[request.sandbox_id] = None
            while len(self._destroyed) > REMEMBER_DESTROYED:
                self._destroyed.popitem(last=False)
        await self.runtime.destroy(request.sandbox_id)
        return common_pb2.Empty()

    async def destroy_all(self) -> None:
        """Destroy every sandbox this servicer created (on shutdown)."""
        ids = list(self._boxes)
        self._boxes.clear()
        await asyncio.gather(*(self.runtime.destroy(i) for i in ids), return_exceptions=True)

"""RPC test fixtures: a real local runtime, served in-process or over gRPC."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from megaflow.environment.abstract import Runtime
from megaflow.environment.config import LocalRuntimeConfig
from megaflow.environment.local import LocalRuntime
from megaflow.rpc.auth import generate_token
from megaflow.rpc.environment_client import GrpcRuntime
from megaflow.rpc.environment_server import EnvironmentServicer
from megaflow.rpc.server import RpcServer


@pytest.fixture
def token() -> str:
    return generate_token()


@pytest.fixture
async def local(tmp_path: Path) -> AsyncIterator[LocalRuntime]:
    rt = LocalRuntime(LocalRuntimeConfig(root=str(tmp_path / "local")))
    await rt.start()
    try:
        yield rt
    finally:
        await rt.stop()


@contextlib.asynccontextmanager
async def serve_environment(
    runtime: Runtime, token: str, max_message_bytes: int = 4 * 1024 * 1024
) -> AsyncIterator[RpcServer]:
    """An Environment Service on a free loopback port, wrapping ``runtime``."""
    server = RpcServer(token, port=0, max_message_bytes=max_message_bytes)
    servicer = EnvironmentServicer(runtime, chunk_size=256 * 1024)
    server.add(servicer.register)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
        await servicer.destroy_all()


@pytest.fixture
async def env_server(local: LocalRuntime, token: str) -> AsyncIterator[RpcServer]:
    async with serve_environment(local, token) as server:
        yield server


@pytest.fixture(params=["inprocess", "grpc"])
async def runtime(
    request: pytest.FixtureRequest, local: LocalRuntime, token: str
) -> AsyncIterator[Runtime]:
    """The same local runtime, called directly or through the gRPC service."""
    if request.param == "inprocess":
        yield local
        return
    async with serve_environment(local, token) as server:
        client = GrpcRuntime(
            server.target, token, max_message_bytes=4 * 1024 * 1024, chunk_size=256 * 1024
        )
        try:
            yield client
        finally:
            await client.stop()

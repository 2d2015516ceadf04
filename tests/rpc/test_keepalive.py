"""Keepalive: long silent calls survive; a frozen peer fails the call instead of hanging."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys

import pytest

from megaflow.core.errors import TransportError
from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.local import LocalRuntime
from megaflow.rpc.environment_client import GrpcRuntime
from megaflow.rpc.environment_server import EnvironmentServicer
from megaflow.rpc.server import RpcServer

KEEPALIVE = 0.3

SERVER = """
import asyncio, sys
from megaflow.environment.dummy import DummyRuntime
from megaflow.rpc.environment_server import EnvironmentServicer
from megaflow.rpc.server import RpcServer

async def main():
    server = RpcServer(sys.argv[1], port=0, keepalive_s=float(sys.argv[2]))
    server.add(EnvironmentServicer(DummyRuntime()).register, "environment")
    print(await server.start(), flush=True)
    await server.wait()

asyncio.run(main())
"""


@pytest.mark.slow
async def test_a_long_silent_exec_is_not_cut_by_pings(local: LocalRuntime, token: str) -> None:
    server = RpcServer(token, port=0, keepalive_s=KEEPALIVE)
    servicer = EnvironmentServicer(local)
    server.add(servicer.register)
    async with (
        server,
        GrpcRuntime(server.target, token, keepalive_s=KEEPALIVE) as rt,
        await rt.create(EnvironmentSpec()) as sb,
    ):
        # Pings go out about once a second; a server with gRPC's default ping policy
        # answers the third without data in between with GOAWAY too_many_pings.
        result = await sb.exec("sleep 8; echo done", timeout=30)
        assert (result.exit_code, result.stdout) == (0, "done\n")
    await servicer.destroy_all()


@pytest.mark.slow
async def test_a_frozen_server_fails_the_call(token: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, token, str(KEEPALIVE)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        port = int(await asyncio.to_thread(proc.stdout.readline))
        async with GrpcRuntime(f"127.0.0.1:{port}", token, keepalive_s=KEEPALIVE) as rt:
            assert await rt.list() == []
            os.kill(proc.pid, signal.SIGSTOP)
            with pytest.raises(TransportError):
                await asyncio.wait_for(rt.list(), timeout=30)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()

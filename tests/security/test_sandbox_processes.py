"""kill_processes: nothing an agent leaves running survives it; the server does."""

from __future__ import annotations

import asyncio

from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.dummy import DummyRuntime
from megaflow.environment.local import LocalRuntime
from megaflow.rpc.auth import generate_token
from megaflow.rpc.environment_client import GrpcRuntime
from tests.environment.conftest import leak_check, local
from tests.rpc.conftest import serve_environment

__all__ = ["leak_check", "local"]

LEAVE_BEHIND = (
    "setsid sh -c 'while :; do sleep 1; done' >/dev/null 2>&1 &\n"
    "python3 -c 'import os,time\n"
    "if os.fork(): os._exit(0)\n"
    "os.setsid()\n"
    "if os.fork(): os._exit(0)\n"
    "time.sleep(1000)' >/dev/null 2>&1 &\n"
    "nohup sleep 1000 >/dev/null 2>&1 &\n"
    "echo started"
)
PS = ["ps", "-eo", "pid=,user=,args="]
# With ppid: what started this ps (the exec server, or its spawner) is no leftover.
PS_PPID = ["ps", "-eo", "pid=,ppid=,user=,args="]


async def test_kill_processes_leaves_only_init_and_server(local: LocalRuntime) -> None:
    async with await local.create(EnvironmentSpec(files={"keep.txt": "kept"})) as sb:
        assert (await sb.exec(LEAVE_BEHIND)).stdout == "started\n"
        await sb.exec("echo more > extra.txt")
        for _ in range(50):  # the daemon's double fork takes a moment
            if "time.sleep" in (await sb.exec(PS)).stdout:
                break
            await asyncio.sleep(0.05)
        before = (await sb.exec(PS)).stdout
        assert "sleep 1" in before
        assert "time.sleep" in before
        await sb.kill_processes()
        rows = [line.split(None, 3) for line in (await sb.exec(PS_PPID)).stdout.splitlines()]
        (ps,) = [r for r in rows if r[3].startswith("ps ")]
        others = [r for r in rows if r[0] not in ("1", "2", ps[0], ps[1])]
        assert others == [], rows
        assert [r[0] for r in rows if r[2] == "root"] == ["1", "2"]  # init and server
        # files stay as they are (unlike reset) and the sandbox works on
        assert (await sb.exec("cat keep.txt extra.txt")).stdout == "keptmore\n"
        await sb.reset()
        assert (await sb.exec("ls")).stdout == "keep.txt\n"


async def test_kill_processes_ends_a_running_exec(local: LocalRuntime) -> None:
    async with await local.create(EnvironmentSpec()) as sb:
        running = asyncio.ensure_future(sb.exec("sleep 100", timeout=60))
        await asyncio.sleep(0.2)
        await sb.kill_processes()
        result = await asyncio.wait_for(running, 10)
        assert result.exit_code == 137


async def test_dummy_runtime_kill_processes() -> None:
    rt = DummyRuntime()
    sb = await rt.create(EnvironmentSpec(files={"a": "b"}))
    await sb.kill_processes()
    assert (await sb.read_file("a")) == b"b"
    await sb.destroy()


async def test_kill_processes_over_grpc(local: LocalRuntime) -> None:
    token = generate_token()
    async with serve_environment(local, token) as server:
        client = GrpcRuntime(server.target, token)
        try:
            async with await client.create(EnvironmentSpec()) as sb:
                await sb.exec("setsid sleep 1000 >/dev/null 2>&1 &")
                assert "sleep 1000" in (await sb.exec(PS)).stdout
                await sb.kill_processes()
                assert "sleep" not in (await sb.exec(PS)).stdout
        finally:
            await client.stop()

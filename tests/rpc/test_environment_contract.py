"""One contract for the Environment Service, in-process and over gRPC alike.

Every test runs twice: against the real ``local`` runtime directly, and
against the same runtime behind a gRPC server and :class:`GrpcRuntime`.
"""

from __future__ import annotations

import asyncio
import io
import tarfile

import pytest

from megaflow.core.errors import InvalidInput, NotFound, SandboxError
from megaflow.environment.abstract import EnvironmentSpec, Runtime, SandboxResources

SPEC = EnvironmentSpec(files={"hello.txt": "hi there\n"}, env={"GREETING": "hello"})


async def test_exec_exit_code_streams_argv_env_cwd(runtime: Runtime) -> None:
    async with await runtime.create(SPEC, owner="t-exec") as sb:
        result = await sb.exec("echo out; echo err >&2; exit 3")
        assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
        assert not result.ok
        assert result.duration_s > 0
        assert (await sb.exec(["cat", "hello.txt"])).stdout == "hi there\n"
        env = await sb.exec("echo $GREETING $EXTRA", env={"EXTRA": "world"})
        assert env.stdout == "hello world\n"
        await sb.exec("mkdir -p sub/dir")
        assert (await sb.exec("pwd", cwd="sub/dir")).stdout.strip() == "/workspace/sub/dir"


async def test_output_cap_and_timeout(runtime: Runtime) -> None:
    async with await runtime.create(SPEC) as sb:
        capped = await sb.exec("yes abcdefgh | head -c 100000", output_cap=1000)
        assert (len(capped.stdout), capped.truncated) == (1000, True)
        slow = await sb.exec("sleep 30; echo never", timeout=0.5)
        assert slow.timed_out
        assert "never" not in slow.stdout


async def test_files_round_trip_binary_and_larger_than_a_chunk(runtime: Runtime) -> None:
    big = bytes(range(256)) * 4096 + b"tail"  # 1 MiB + 4 bytes: several 256 KiB chunks
    async with await runtime.create(SPEC) as sb:
        await sb.write_file("a/b/c.bin", b"\x00\x01binary\xff", mode=0o600)
        assert await sb.read_file("a/b/c.bin") == b"\x00\x01binary\xff"
        assert (await sb.exec("stat -c %a a/b/c.bin")).stdout.strip() == "600"
        await sb.write_file("/workspace/big.bin", big)
        assert await sb.read_file("big.bin") == big
        assert (await sb.exec("wc -c < big.bin")).stdout.strip() == str(len(big))
        await sb.write_file("empty", b"")
        assert await sb.read_file("empty") == b""
        with pytest.raises(NotFound):
            await sb.read_file("missing.txt")


async def test_upload_and_download_tar(runtime: Runtime) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in {"pkg/x.py": b"x = 1\n", "pkg/y/z.txt": b"zz"}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    async with await runtime.create(SPEC) as sb:
        await sb.upload(buf.getvalue(), "up")
        assert (await sb.exec("cat up/pkg/y/z.txt")).stdout == "zz"
        with tarfile.open(fileobj=io.BytesIO(await sb.download("up/pkg"))) as tar:
            member = tar.extractfile("pkg/x.py")
            assert member is not None
            assert member.read() == b"x = 1\n"
            assert {"pkg/x.py", "pkg/y/z.txt"} <= set(tar.getnames())


async def test_reset_restores_the_workspace(runtime: Runtime) -> None:
    spec = EnvironmentSpec(files={"keep.txt": "v1"}, setup=["echo from-setup > setup.txt"])
    async with await runtime.create(spec) as sb:
        await sb.exec("echo v2 > keep.txt; touch junk; rm setup.txt")
        await sb.reset()
        assert (await sb.exec("cat keep.txt setup.txt")).stdout == "v1from-setup\n"
        assert (await sb.exec("ls junk")).exit_code != 0


async def test_stats(runtime: Runtime) -> None:
    async with await runtime.create(SPEC) as sb:
        await sb.exec("sleep 5 > /dev/null 2>&1 &")
        stats = await sb.stats()
        assert stats.memory_bytes > 0
        assert stats.pids >= 2


async def test_failed_setup_is_a_start_error(runtime: Runtime) -> None:
    with pytest.raises(SandboxError, match="setup"):
        await runtime.create(EnvironmentSpec(setup=["echo broken >&2; exit 7"]))
    assert await runtime.list() == []


async def test_list_and_idempotent_destroy(runtime: Runtime) -> None:
    a = await runtime.create(SPEC, owner="task-a")
    b = await runtime.create(SPEC, owner="task-b")
    infos = {i.id: i for i in await runtime.list()}
    assert set(infos) == {a.id, b.id}
    assert infos[a.id].owner == "task-a"
    assert infos[a.id].deadline > infos[a.id].created_at
    await a.destroy()
    await a.destroy()
    await runtime.destroy(a.id)
    await runtime.destroy("no-such-sandbox")
    assert [i.id for i in await runtime.list()] == [b.id]
    with pytest.raises(SandboxError):
        await a.exec("true")
    await b.destroy()


async def test_invalid_spec_is_rejected_before_anything_starts(runtime: Runtime) -> None:
    too_big = EnvironmentSpec(resources=SandboxResources(cpus=1000))
    with pytest.raises(InvalidInput, match="cpus"):
        await runtime.create(too_big)
    assert await runtime.list() == []


async def test_concurrent_execs(runtime: Runtime) -> None:
    async with await runtime.create(SPEC) as sb:
        results = await asyncio.gather(*(sb.exec(f"sleep 0.2; echo {i}") for i in range(6)))
        assert [r.stdout.strip() for r in results] == [str(i) for i in range(6)]

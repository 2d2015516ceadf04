"""What only the wire adds: auth, path confinement, size limits, streaming, TLS."""

from __future__ import annotations

import subprocess
from pathlib import Path

import grpc
import pytest

from megaflow.core.errors import AuthError, Backpressure, InvalidInput, NotFound, TransportError
from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.local import LocalRuntime
from megaflow.rpc.auth import generate_token
from megaflow.rpc.config import ClusterConfig, TlsConfig
from megaflow.rpc.environment_client import GrpcRuntime
from megaflow.rpc.environment_server import EnvironmentServicer
from megaflow.rpc.gen import common_pb2, environment_pb2_grpc
from megaflow.rpc.gen import environment_pb2 as pb
from megaflow.rpc.health import check_health
from megaflow.rpc.server import RpcServer, check_once
from tests.rpc.conftest import serve_environment

MiB = 1024 * 1024


async def test_wrong_token_is_unauthenticated_and_creates_nothing(
    local: LocalRuntime, env_server: RpcServer
) -> None:
    async with GrpcRuntime(env_server.target, generate_token()) as intruder:
        with pytest.raises(AuthError, match="bearer token"):
            await intruder.create(EnvironmentSpec())
        with pytest.raises(AuthError):
            await intruder.list()
    assert await local.list() == []


async def test_missing_token_is_unauthenticated_for_every_kind_of_call(
    local: LocalRuntime, env_server: RpcServer, token: str
) -> None:
    async with GrpcRuntime(env_server.target, token) as owner:
        sb = await owner.create(EnvironmentSpec())
        async with grpc.aio.insecure_channel(env_server.target) as channel:
            stub = environment_pb2_grpc.EnvironmentStub(channel)  # type: ignore[no-untyped-call]
            calls = {
                "unary": stub.CreateSandbox(pb.CreateSandboxRequest(spec=pb.EnvironmentSpec())),
                "stream_in": stub.WriteFile(
                    iter([pb.WriteFileChunk(sandbox_id=sb.id, path="pwned", data=b"x")])
                ),
                "bad_scheme": stub.Exec(
                    pb.ExecRequest(sandbox_id=sb.id, shell="touch pwned2"),
                    metadata=(("authorization", token),),
                ),
            }
            for name, call in calls.items():
                with pytest.raises(grpc.aio.AioRpcError) as info:
                    await call
                assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED, name
            with pytest.raises(grpc.aio.AioRpcError) as info:
                async for _ in stub.ReadFile(pb.FileRequest(sandbox_id=sb.id, path="x")):
                    pass
            assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert [i.id for i in await local.list()] == [sb.id]
        assert (await sb.exec("ls pwned pwned2")).exit_code != 0
        await sb.destroy()


@pytest.mark.parametrize(
    "path",
    ["/etc/passwd", "../etc/passwd", "a/../../etc", "/workspace/../etc", "/proc/1/environ", ""],
)
async def test_paths_outside_the_workdir_are_invalid(
    env_server: RpcServer, token: str, path: str
) -> None:
    async with (
        GrpcRuntime(env_server.target, token) as rt,
        await rt.create(EnvironmentSpec()) as sb,
    ):
        with pytest.raises(InvalidInput):
            await sb.read_file(path)
        with pytest.raises(InvalidInput):
            await sb.write_file(path, b"x")
        with pytest.raises(InvalidInput):
            await sb.download(path)
        with pytest.raises(InvalidInput):
            await sb.upload(b"", path or "/")


async def test_invalid_request_fields_are_invalid_argument(
    env_server: RpcServer, token: str
) -> None:
    async with grpc.aio.insecure_channel(env_server.target) as channel:
        stub = environment_pb2_grpc.EnvironmentStub(channel)  # type: ignore[no-untyped-call]
        md = (("authorization", f"Bearer {token}"),)
        res = pb.Resources(cpus=1, memory_mb=64, pids=64)
        bad = pb.EnvironmentSpec(network="everywhere", ttl_s=60, resources=res, workdir="/w")
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.CreateSandbox(pb.CreateSandboxRequest(spec=bad), metadata=md)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "invalid EnvironmentSpec: network: Input should be" in (info.value.details() or "")
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.Stats(pb.SandboxRef(sandbox_id="nope"), metadata=md)
        assert info.value.code() == grpc.StatusCode.NOT_FOUND
        listed = await stub.ListSandboxes(common_pb2.Empty(), metadata=md)
        assert list(listed.sandboxes) == []


async def test_unknown_sandbox_is_not_found(env_server: RpcServer, token: str) -> None:
    async with GrpcRuntime(env_server.target, token) as rt:
        sb = await rt.create(EnvironmentSpec())
        await rt.call(
            "Destroy", lambda s, md: s.Destroy(pb.SandboxRef(sandbox_id=sb.id), metadata=md)
        )
        ghost = type(sb)(sb.info.model_copy(update={"id": "ghost"}), rt)
        with pytest.raises(NotFound, match="ghost"):
            await ghost.exec("true")


async def test_message_limit_and_streaming_exec(local: LocalRuntime, token: str) -> None:
    async with (
        serve_environment(local, token, max_message_bytes=1 * MiB) as server,
        GrpcRuntime(server.target, token, max_message_bytes=1 * MiB) as rt,
    ):
        sb = await rt.create(EnvironmentSpec())
        command = "head -c 3000000 /dev/zero | tr '\\0' a; echo err >&2"
        with pytest.raises(Backpressure):
            await sb.exec(command, output_cap=4 * MiB)
        got: dict[str, list[bytes]] = {"stdout": [], "stderr": []}
        result = await sb.exec_stream(
            command,
            lambda stream, data: got[stream].append(data),
            output_cap=4 * MiB,
            chunk_size=256 * 1024,
        )
        assert result.exit_code == 0
        out = b"".join(got["stdout"])
        assert (len(out), set(out)) == (3_000_000, {ord("a")})
        assert max(len(c) for c in got["stdout"]) <= 256 * 1024
        assert b"".join(got["stderr"]) == b"err\n"
        big = b"z" * (3 * MiB)  # larger than one message: travels in chunks
        await sb.write_file("big", big)
        assert await sb.read_file("big") == big
        await sb.destroy()


async def test_unreachable_service_is_a_transport_error(token: str) -> None:
    async with GrpcRuntime("127.0.0.1:1", token) as rt:
        with pytest.raises(TransportError):
            await rt.list()


def _self_signed(tmp_path: Path) -> TlsConfig:
    key, cert = tmp_path / "server.key", tmp_path / "server.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return TlsConfig(cert_file=str(cert), key_file=str(key), ca_file=str(cert))


async def test_tls(local: LocalRuntime, token: str, tmp_path: Path) -> None:
    tls = _self_signed(tmp_path)
    server = RpcServer(token, port=0, tls=tls)
    servicer = EnvironmentServicer(local)
    server.add(servicer.register)
    async with server:
        async with (
            GrpcRuntime(server.target, token, tls=tls) as rt,
            await rt.create(EnvironmentSpec()) as sb,
        ):
            assert (await sb.exec("echo secure")).stdout == "secure\n"
        async with GrpcRuntime(server.target, token) as plain:
            with pytest.raises(TransportError):
                await plain.list()
    await servicer.destroy_all()


async def test_health_needs_the_token_and_names_the_services(
    local: LocalRuntime, token: str
) -> None:
    server = RpcServer(token, port=0)
    server.add(EnvironmentServicer(local).register, "environment")
    async with server, grpc.aio.insecure_channel(server.target) as channel:
        assert await check_once(channel, token) == ["environment"]
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await check_once(channel, generate_token())
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        cfg = ClusterConfig.model_validate(
            {
                "auth": {"token": token},
                "environment": {"port": server.port},
                "agent": {"port": server.port},
            }
        )
        await check_health(cfg, "environment", token, timeout=5)
        with pytest.raises(TransportError, match="not agent"):
            await check_health(cfg, "agent", token, timeout=0.5)
        with pytest.raises(AuthError):
            await check_health(cfg, "environment", generate_token(), timeout=5)


async def test_the_private_tmp_is_allowed(env_server: RpcServer, token: str) -> None:
    async with (
        GrpcRuntime(env_server.target, token) as rt,
        await rt.create(EnvironmentSpec()) as sb,
    ):
        await sb.write_file("/tmp/gold.patch", b"diff")
        assert (await sb.exec("cat /tmp/gold.patch")).stdout == "diff"
        assert await sb.read_file("/tmp/gold.patch") == b"diff"


async def test_a_port_in_use_is_refused_not_shared(env_server: RpcServer, token: str) -> None:
    second = RpcServer(token, port=env_server.port)
    with pytest.raises(TransportError, match="in use"):
        await second.start()
    await second.stop(None)

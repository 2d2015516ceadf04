"""The kubernetes runtime end to end on Podman: its pods played, its execs over the real
client's websocket stream (``podman_kubelet``), its scripts running in the container."""

from __future__ import annotations

import io
import tarfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from megaflow.core.errors import NotFound, SandboxStartError
from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.config import KubernetesRuntimeConfig
from megaflow.environment.kubernetes import KubernetesRuntime
from tests.environment.kubernetes.podman_kubelet import ExecServer, PodmanCoreV1Api
from tests.fixtures.podman import PodmanService

pytestmark = pytest.mark.container

# /box: a workdir the busybox image lacks (Podman would fill a fresh volume from it)
SPEC = {"workdir": "/box", "files": {"hello.txt": "hi\n"}, "env": {"GREETING": "hello"}}


@pytest.fixture(params=["v5.channel.k8s.io", "v4.channel.k8s.io"])
def exec_server(
    podman_service: PodmanService, request: pytest.FixtureRequest
) -> Iterator[ExecServer]:
    server = ExecServer(podman_service, request.param)
    yield server
    server.close()


@pytest.fixture
async def rt(
    podman_service: PodmanService, exec_server: ExecServer, tmp_path: Path
) -> AsyncIterator[tuple[KubernetesRuntime, PodmanCoreV1Api]]:
    api = PodmanCoreV1Api(podman_service, exec_server, tmp_path)
    cfg = KubernetesRuntimeConfig(
        host_image=podman_service.image, image_pull_policy="Never", reap_interval_s=None,
        start_timeout_s=60,
    )  # fmt: skip
    runtime = KubernetesRuntime(cfg, api=api)
    await runtime.start()
    yield runtime, api
    await runtime.stop()
    assert api.pods == {}
    left = podman_service.podman("pod", "ps", "-q").stdout.split()
    assert left == [], "a sandbox pod outlived the runtime"


async def test_exec_files_and_stats_in_a_played_pod(
    rt: tuple[KubernetesRuntime, PodmanCoreV1Api], exec_server: ExecServer
) -> None:
    runtime, _ = rt
    async with await runtime.create(EnvironmentSpec(**SPEC), owner="run/t/0") as sb:
        r = await sb.exec("echo out; echo err >&2; id -u; exit 3")
        assert (r.exit_code, r.stdout, r.stderr) == (3, "out\n1000\n", "err\n")
        r = await sb.exec("echo $GREETING $EXTRA; pwd", env={"EXTRA": "world"}, cwd="sub")
        assert r.exit_code == 126  # no such directory yet: the wrapper's cd fails
        await sb.exec("mkdir -p sub")
        r = await sb.exec("echo $GREETING $EXTRA; pwd", env={"EXTRA": "world"}, cwd="sub")
        assert r.stdout == "hello world\n/box/sub\n"
        assert (await sb.exec(["cat", "hello.txt"])).stdout == "hi\n"  # placed at start
        capped = await sb.exec("yes abcdefgh | head -c 100000", output_cap=1000, timeout=30)
        assert len(capped.stdout) == 1000
        assert capped.truncated
        blob = bytes(range(256)) * 1024  # binary, 256 KiB: several stdin frames
        await sb.write_file("a/b.bin", blob, mode=0o600)
        assert await sb.read_file("a/b.bin") == blob
        assert (await sb.exec("stat -c %a a/b.bin")).stdout.strip() == "600"
        with pytest.raises(NotFound):
            await sb.read_file("missing")
        with tarfile.open(fileobj=io.BytesIO(await sb.download("a"))) as tar:
            assert sorted(tar.getnames()) == ["a", "a/b.bin"]
        stats = await sb.stats()
        assert stats.memory_bytes > 0
        assert stats.pids >= 1
    protocols = {tuple(q.get("command", [])[:2]) for q in exec_server.requests}
    assert ("/bin/sh", "-c") in protocols
    assert all(q["container"] == ["sandbox"] for q in exec_server.requests)


async def test_timeout_kills_the_whole_command_and_reset_restores(
    rt: tuple[KubernetesRuntime, PodmanCoreV1Api],
) -> None:
    runtime, _ = rt
    async with await runtime.create(EnvironmentSpec(**SPEC)) as sb:
        r = await sb.exec("sleep 60 & sleep 60; echo never", timeout=2)
        assert r.timed_out
        assert r.exit_code == 137
        assert "never" not in r.stdout
        left = await sb.exec("ps -o comm | grep -c sleep || true")
        assert left.stdout.strip() == "0"  # the kill script found both by their tag
        await sb.exec("rm hello.txt; echo junk > junk; echo t > /tmp/t")
        await sb.reset()
        assert (await sb.exec("ls; ls /tmp")).stdout == "hello.txt\n"


async def test_a_failing_setup_deletes_the_played_pod(
    rt: tuple[KubernetesRuntime, PodmanCoreV1Api], podman_service: PodmanService
) -> None:
    runtime, api = rt
    with pytest.raises(SandboxStartError, match="exited 7"):
        await runtime.create(EnvironmentSpec(workdir="/box", setup=["exit 7"]))
    assert api.names()[-1] == "delete_namespaced_pod"
    assert podman_service.podman("pod", "ps", "-q").stdout.split() == []

"""The container runtime against a real Podman service (Docker-compatible API)."""

from __future__ import annotations

import asyncio
import io
import json
import socket
import subprocess
import sys
import tarfile
import textwrap
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import docker
import pytest
from prometheus_client import CollectorRegistry

from megaflow.core.errors import SandboxError, SandboxStartError, TransportError
from megaflow.environment.abstract import EnvironmentSpec, SandboxResources
from megaflow.environment.config import ContainerRuntimeConfig
from megaflow.environment.container import ContainerRuntime, ContainerSandbox
from megaflow.environment.factory import make_runtime
from megaflow.monitoring.environment import EnvironmentMetrics
from tests.fixtures.podman import PodmanService

pytestmark = pytest.mark.container


def _config(svc: PodmanService, **kw: object) -> ContainerRuntimeConfig:
    base = {"base_url": svc.url, "host_image": svc.image, "namespace": f"t{uuid.uuid4().hex[:8]}"}
    return ContainerRuntimeConfig(**{**base, **kw})  # type: ignore[arg-type]


def _engine(svc: PodmanService) -> docker.DockerClient:
    return docker.DockerClient(base_url=svc.url, version="auto")


@pytest.fixture
async def rt(podman_service: PodmanService) -> AsyncIterator[ContainerRuntime]:
    runtime = ContainerRuntime(_config(podman_service))
    await runtime.start()
    try:
        yield runtime
    finally:
        await runtime.stop()
    engine = _engine(podman_service)
    try:
        left = engine.api.containers(all=True)
    finally:
        engine.close()
    assert left == [], f"containers leaked: {[c['Names'] for c in left]}"


async def test_container_carries_labels_limits_and_no_network(
    rt: ContainerRuntime, podman_service: PodmanService
) -> None:
    spec = EnvironmentSpec(resources=SandboxResources(cpus=0.5, memory_mb=96, pids=48), ttl_s=600)
    async with await rt.create(spec, owner="task-7") as sb:
        assert isinstance(sb, ContainerSandbox)
        engine = _engine(podman_service)
        try:
            attrs = engine.api.inspect_container(sb.container_id)
        finally:
            engine.close()
        labels = attrs["Config"]["Labels"]
        assert labels["megaflow.owner"] == "task-7"
        assert float(labels["megaflow.deadline"]) == sb.info.deadline
        assert sb.info.deadline - sb.info.created_at == 600
        host = attrs["HostConfig"]
        assert (host["Memory"], host["PidsLimit"], host["NanoCpus"]) == (96 << 20, 48, 5 * 10**8)
        assert host["NetworkMode"] == "none"
        assert (await sb.exec("ls /sys/class/net")).stdout.split() == ["lo"]
        assert sb.start_seconds > 0


async def test_no_network_reaches_a_host_server(rt: ContainerRuntime) -> None:
    server = socket.create_server(("0.0.0.0", 0))
    port = server.getsockname()[1]
    addresses = {"127.0.0.1", socket.gethostbyname(socket.gethostname())}
    try:
        async with await rt.create(EnvironmentSpec()) as sb:
            for addr in sorted(addresses):
                r = await sb.exec(f"nc -w 2 {addr} {port} </dev/null && echo connected", timeout=10)
                assert "connected" not in r.stdout
                assert r.exit_code != 0
    finally:
        server.close()


async def test_timeout_kills_every_process_of_the_command(rt: ContainerRuntime) -> None:
    async with await rt.create(EnvironmentSpec()) as sb:
        r = await sb.exec("sleep 300 & setsid sleep 301 & sleep 302; echo never", timeout=0.5)
        assert r.timed_out
        assert r.exit_code == 137
        assert "never" not in r.stdout
        ps = await sb.exec("ps -o comm")
        assert "sleep" not in ps.stdout
        assert (await sb.exec("echo alive")).stdout == "alive\n"


async def test_output_flood_is_truncated(rt: ContainerRuntime) -> None:
    async with await rt.create(EnvironmentSpec()) as sb:
        r = await sb.exec("yes 0123456789abcdef | head -c 100000000; echo done >&2", timeout=60)
        assert r.exit_code == 0
        assert r.truncated
        assert len(r.stdout) == 1024 * 1024
        assert r.stderr == "done\n"


async def test_memory_hog_is_killed_and_the_sandbox_carries_on(rt: ContainerRuntime) -> None:
    spec = EnvironmentSpec(resources=SandboxResources(memory_mb=32))
    async with await rt.create(spec) as sb:
        hog = await sb.exec("awk 'BEGIN { s = \"x\"; while (1) s = s s }'", timeout=30)
        assert hog.exit_code == 137
        assert not hog.timed_out
        assert (await sb.exec("echo fine")).stdout == "fine\n"
        assert (await sb.stats()).memory_peak_bytes > 0


@pytest.mark.slow
async def test_fork_bomb_is_held_by_the_pids_limit_and_reset_recovers(rt: ContainerRuntime) -> None:
    spec = EnvironmentSpec(files={"keep.txt": "kept"}, resources=SandboxResources(pids=40))
    async with await rt.create(spec) as sb:
        bomb = await sb.exec("b() { b | b & }; b; sleep 1", timeout=3)
        assert "can't fork" in bomb.stderr
        assert (await sb.stats()).pids <= 40
        await sb.reset()
        assert (await sb.stats()).pids < 10
        assert (await sb.exec("cat keep.txt")).stdout == "kept"


async def test_stats_come_from_the_engine(rt: ContainerRuntime) -> None:
    async with await rt.create(EnvironmentSpec()) as sb:
        await sb.exec("sleep 5 > /dev/null 2>&1 & sleep 5 > /dev/null 2>&1 &")
        stats = await sb.stats()
        assert stats.pids >= 4  # init, keeper, two sleeps
        assert 0 < stats.memory_bytes <= stats.memory_peak_bytes
        assert stats.cpu_seconds > 0


async def test_repo_directory_and_disk_limit(rt: ContainerRuntime, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "main.py").write_text("print('hi')\n")
    spec = EnvironmentSpec(repo=str(repo), resources=SandboxResources(disk_mb=4))
    async with await rt.create(spec) as sb:
        assert await sb.read_file("src/main.py") == b"print('hi')\n"
        full = await sb.exec("dd if=/dev/zero of=big bs=1M count=8")
        assert full.exit_code != 0
        assert "space" in full.stderr


async def test_rootfs_tarball_is_imported_once_and_timed_apart(
    rt: ContainerRuntime, podman_service: PodmanService
) -> None:
    spec = EnvironmentSpec(image=str(podman_service.rootfs))
    first = await rt.create(spec)
    second = await rt.create(spec)
    try:
        assert isinstance(first, ContainerSandbox)
        assert isinstance(second, ContainerSandbox)
        assert set(rt.image_load_seconds) == {str(podman_service.rootfs)}
        assert first.image_load_seconds == rt.image_load_seconds[spec.image] > 0
        assert (await second.exec("head -1 /etc/passwd")).stdout.startswith("root:")
        engine = _engine(podman_service)
        try:
            tags = [t for i in engine.images.list() for t in i.tags if "megaflow-rootfs" in t]
        finally:
            engine.close()
        assert len(tags) == 1
    finally:
        await first.destroy()
        await second.destroy()


async def test_bad_images_are_start_errors_and_leave_nothing(
    rt: ContainerRuntime, podman_service: PodmanService, tmp_path: Path
) -> None:
    with pytest.raises(SandboxStartError, match="does not exist"):
        await rt.create(EnvironmentSpec(image=str(tmp_path / "missing-rootfs.tar")))
    not_tar = tmp_path / "not-a-rootfs.tar"
    not_tar.write_bytes(b"this is not a tar archive")
    with pytest.raises(SandboxStartError, match="could not be imported"):
        await rt.create(EnvironmentSpec(image=str(not_tar)))
    offline = ContainerRuntime(_config(podman_service, pull="never"))
    try:
        with pytest.raises(SandboxStartError, match="not in the engine"):
            await offline.create(EnvironmentSpec(image="localhost/megaflow-no-such-image:1"))
        no_host = ContainerRuntime(_config(podman_service, host_image=None))
        with pytest.raises(SandboxStartError, match="host"):
            await no_host.create(EnvironmentSpec())
        await no_host.stop()
    finally:
        await offline.stop()
    with pytest.raises(SandboxStartError, match="cpus"):
        await rt.create(EnvironmentSpec(resources=SandboxResources(cpus=1000)))
    assert await rt.list() == []


async def test_missing_engine_names_what_to_start(tmp_path: Path) -> None:
    url = f"unix://{tmp_path}/no-engine.sock"
    runtime = ContainerRuntime(ContainerRuntimeConfig(base_url=url))
    with pytest.raises(TransportError, match="podman system service") as err:
        await runtime.start()
    assert url in str(err.value)
    with pytest.raises(SandboxStartError, match="no container engine answered"):
        await runtime.create(EnvironmentSpec())
    await runtime.stop()


async def test_reap_removes_expired_and_crashed_sandboxes(
    rt: ContainerRuntime, podman_service: PodmanService
) -> None:
    live = await rt.create(EnvironmentSpec(), owner="alive")
    expiring = await rt.create(EnvironmentSpec(ttl_s=0.2), owner="expiring")
    crash = textwrap.dedent(f"""
        import asyncio, os
        from megaflow.environment.abstract import EnvironmentSpec
        from megaflow.environment.config import ContainerRuntimeConfig
        from megaflow.environment.container import ContainerRuntime
        async def main():
            rt = ContainerRuntime(ContainerRuntimeConfig(
                base_url={podman_service.url!r}, host_image={podman_service.image!r},
                namespace={rt.config.namespace!r}, reap_on_start=False))
            await rt.start()
            sb = await rt.create(EnvironmentSpec(), owner="crashed")
            print(sb.id, flush=True)
            os._exit(0)  # no stop(), no destroy(): a crash
        asyncio.run(main())
    """)
    out = subprocess.run(
        [sys.executable, "-c", crash], capture_output=True, text=True, timeout=120, check=True
    )
    crashed_id = out.stdout.strip()
    owners = {i.id: i.owner for i in await rt.list()}
    assert owners == {live.id: "alive", expiring.id: "expiring", crashed_id: "crashed"}
    time.sleep(0.3)
    assert await rt.reap_orphans() == 2
    assert [i.id for i in await rt.list()] == [live.id]
    with pytest.raises(SandboxError):
        await expiring.exec("true")
    await expiring.destroy()
    await live.destroy()


async def test_cancelled_exec_kills_its_processes(rt: ContainerRuntime) -> None:
    async with await rt.create(EnvironmentSpec()) as sb:
        task = asyncio.ensure_future(sb.exec("sleep 300", timeout=None))
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert "sleep" not in (await sb.exec("ps -o comm")).stdout


async def test_download_of_a_file_and_upload_of_gzip(rt: ContainerRuntime) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("data/n.txt")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"123"))
    async with await rt.create(EnvironmentSpec()) as sb:
        await sb.upload(buf.getvalue(), "/opt/in")
        with tarfile.open(fileobj=io.BytesIO(await sb.download("/opt/in/data/n.txt"))) as tar:
            member = tar.extractfile("n.txt")
            assert member is not None
            assert member.read() == b"123"


async def test_factory_and_metrics(podman_service: PodmanService) -> None:
    registry = CollectorRegistry()
    metrics = EnvironmentMetrics(registry)
    runtime = make_runtime(_config(podman_service), metrics=metrics)
    assert isinstance(runtime, ContainerRuntime)
    async with runtime:
        async with await runtime.create(EnvironmentSpec()) as sb:
            await sb.exec("sleep 5", timeout=0.3)
            live = registry.get_sample_value(
                "megaflow_sandboxes", {"runtime": "container", "state": "ready"}
            )
            assert live == 1
        value = registry.get_sample_value
        assert (
            value("megaflow_sandbox_start_seconds_count", {"runtime": "container", "kind": "cold"})
            == 1
        )
        # one command: with nothing to place in the workspace, the start takes the snapshot
        assert value("megaflow_sandbox_exec_seconds_count", {"runtime": "container"}) == 1
        assert value("megaflow_sandbox_teardown_seconds_count", {"runtime": "container"}) == 1
        assert (
            value("megaflow_sandbox_failures_total", {"runtime": "container", "kind": "timeout"})
            == 1
        )
        assert value("megaflow_sandboxes", {"runtime": "container", "state": "ready"}) == 0


async def test_reset_without_setup_uses_the_snapshot_taken_at_start(rt: ContainerRuntime) -> None:
    async with await rt.create(EnvironmentSpec(workdir="/usr/sbin")) as sb:
        listing = "for f in *; do echo $f $(readlink $f); done"
        before = (await sb.exec(listing)).stdout
        await sb.exec("rm -f ./*; echo x > junk")
        await sb.reset()
        assert (await sb.exec(listing)).stdout == before
        assert "/bin/busybox" in before


def test_the_seccomp_profile_is_inline_for_docker_and_a_private_file_for_podman() -> None:
    from megaflow.environment.container.seccomp import Profiles, profile
    from megaflow.environment.local.seccomp import DENIED

    rules = profile("none", "x86_64")["syscalls"]
    assert set(DENIED) <= {n for r in rules if "args" not in r for n in r["names"]}
    profiles = Profiles()
    docker_opt = profiles.security_opt("none", podman=False)
    assert json.loads(docker_opt.removeprefix("seccomp=")) == profile("none")
    path = Path(profiles.security_opt("host", podman=True).removeprefix("seccomp="))
    try:
        assert json.loads(path.read_text()) == profile("host")
        assert path.parent.stat().st_mode & 0o077 == 0  # no other user can swap it
    finally:
        profiles.close()
    assert not path.exists()

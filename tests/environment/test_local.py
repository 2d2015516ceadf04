"""The local runtime beyond the contract: images, bad input, cgroups, reaping."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tarfile
import textwrap
import time
from pathlib import Path

import pytest

from megaflow.core.errors import ConfigError, InvalidInput, SandboxStartError
from megaflow.environment.abstract import EnvironmentSpec, SandboxResources
from megaflow.environment.local import LocalRuntime
from megaflow.environment.local.cgroups import CgroupLayout, SandboxCgroup, detect
from megaflow.environment.local.images import ImageCache
from megaflow.environment.local.userns import STAGE_ROOT
from tests.environment.conftest import local_runtime, mounts, our_cgroups


async def test_rootfs_tarball_image_without_python(local: LocalRuntime, rootfs_tar: Path) -> None:
    spec = EnvironmentSpec(image=str(rootfs_tar), files={"f.txt": "in rootfs"})
    async with await local.create(spec) as a, await local.create(spec) as b:
        result = await a.exec("cat /etc/hostname f.txt; ls /usr/bin/python3")
        assert result.stdout.startswith("sandbox\nin rootfs")
        assert "No such file" in result.stderr  # the image has no python of its own
        assert (await b.exec("echo x > /etc/passwd")).exit_code != 0
        assert len(local.images.entries()) == 1  # unpacked once, shared
        assert (await a.read_file("f.txt")) == b"in rootfs"


async def test_rootfs_directory_image(
    local: LocalRuntime, rootfs_tar: Path, tmp_path: Path
) -> None:
    root = tmp_path / "unpacked"
    root.mkdir()
    with tarfile.open(rootfs_tar) as tar:
        tar.extractall(root, filter="tar")
    async with await local.create(EnvironmentSpec(image=str(root))) as sb:
        assert (await sb.exec(["busybox", "echo", "dir image"])).stdout == "dir image\n"


def test_image_cache_evicts_least_recently_used(tmp_path: Path, rootfs_tar: Path) -> None:
    other = tmp_path / "other.tar"
    other.write_bytes(rootfs_tar.read_bytes())
    with tarfile.open(other, "a") as tar:
        tar.add(__file__, arcname="extra.py")
    cache = ImageCache(tmp_path / "cache", max_bytes=1)  # room for one image only
    _, first = cache.resolve(str(rootfs_tar))
    cache.release(first)
    time.sleep(0.01)
    root, second = cache.resolve(str(other))
    assert (root / "extra.py").exists()
    assert [key for key, _, _ in cache.entries()] == [second]
    # an image in use is never evicted
    _, again = cache.resolve(str(rootfs_tar))
    assert {key for key, _, _ in cache.entries()} == {first, second}
    cache.release(again)
    cache.release(second)


async def test_unknown_image_is_a_clear_error(local: LocalRuntime) -> None:
    with pytest.raises(InvalidInput, match=r"unknown image.*'host', a root filesystem"):
        await local.create(EnvironmentSpec(image="/no/such/image.tar"))
    assert await local.list() == []


async def test_impossible_limits_are_clear_errors(local: LocalRuntime) -> None:
    with pytest.raises(InvalidInput, match="cpus"):
        await local.create(EnvironmentSpec(resources=SandboxResources(cpus=1000)))
    with pytest.raises(InvalidInput, match="memory_mb"):
        await local.create(EnvironmentSpec(resources=SandboxResources(memory_mb=16)))
    with pytest.raises(InvalidInput, match="memory_mb"):
        await local.create(EnvironmentSpec(resources=SandboxResources(memory_mb=10**7)))


def test_unsupported_cgroup_setup_says_what_to_do() -> None:
    layout = detect("auto")
    assert layout is not None
    other = "v2" if layout.version == 1 else "v1"
    with pytest.raises(ConfigError, match="'off'"):
        detect(other)  # type: ignore[arg-type]


async def test_cgroups_off_still_runs(tmp_path: Path) -> None:
    rt = local_runtime(tmp_path, cgroups="off")
    async with rt, await rt.create(EnvironmentSpec()) as sb:
        assert (await sb.exec("echo ok")).stdout == "ok\n"
        assert (await sb.stats()).memory_bytes == 0


async def test_missing_bwrap_names_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SandboxStartError, match="bubblewrap"):
        await local_runtime(tmp_path).start()


def test_cgroup_v2_limits_and_stats_files(tmp_path: Path) -> None:
    """v2 is not mounted with controllers here; check the files we write and read."""
    layout = CgroupLayout(2, dict.fromkeys(("memory", "cpu", "pids"), tmp_path))
    group = SandboxCgroup(layout, "owner", "sbx")
    d = tmp_path / "megaflow" / "owner" / "sbx"
    d.mkdir(parents=True)
    (d / "memory.swap.max").write_text("max\n")
    group.limit(SandboxResources(cpus=1.5, memory_mb=256, pids=99))
    assert (d / "memory.max").read_text() == str(256 * 2**20)
    assert (d / "cpu.max").read_text() == "150000 100000"
    assert (d / "pids.max").read_text() == "99"
    assert (d / "memory.swap.max").read_text() == "0"
    (d / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 1\n")
    (d / "memory.current").write_text("1048576\n")
    (d / "memory.peak").write_text("2097152\n")
    (d / "pids.current").write_text("3\n")
    (d / "memory.events").write_text("low 0\noom_kill 2\n")
    stats = group.stats()
    assert (stats.cpu_seconds, stats.memory_bytes, stats.memory_peak_bytes) == (2.5, 2**20, 2**21)
    assert stats.pids == 3
    assert group.oom_kills() == 2


async def test_expired_sandbox_is_reaped(local: LocalRuntime) -> None:
    sb = await local.create(EnvironmentSpec(ttl_s=0.05))
    await asyncio.sleep(0.1)
    assert await local.reap_orphans() == 1
    assert await local.list() == []
    assert sb.info.state == "stopped"


@pytest.mark.slow
async def test_reaper_cleans_up_after_a_crashed_process(tmp_path: Path) -> None:
    root = tmp_path / "local"
    script = textwrap.dedent(f"""
        import asyncio, os
        from megaflow.environment.abstract import EnvironmentSpec, SandboxResources
        from megaflow.environment.config import LocalRuntimeConfig
        from megaflow.environment.local import LocalRuntime
        async def main():
            rt = LocalRuntime(LocalRuntimeConfig(root={str(root)!r}))
            await rt.start()
            for _ in range(2):
                await rt.create(EnvironmentSpec(), owner="doomed")
            await rt.create(  # with a disk limit: a tmpfs, also in the staged view
                EnvironmentSpec(resources=SandboxResources(disk_mb=4)), owner="doomed"
            )
            print(rt.process, flush=True)
            os._exit(9)  # crash: no teardown at all
        asyncio.run(main())
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    owner = done.stdout.strip()
    assert owner, done.stderr
    assert len(list((root / "boxes").iterdir())) == 3
    leftover = list(Path("/sys/fs/cgroup").glob(f"*/megaflow/{owner}/*"))
    assert leftover, "the crashed process should have left cgroups behind"
    stage = STAGE_ROOT / owner
    assert mounts(stage), "the crashed process should have left its staging mounts"
    assert mounts(root), "and its disk tmpfs"
    rt = LocalRuntime(local_runtime(tmp_path).cfg)
    await rt.start()  # reaps on start
    try:
        assert list((root / "boxes").iterdir()) == []
        assert not list(Path("/sys/fs/cgroup").glob(f"*/megaflow/{owner}"))
        assert not mounts(stage)
        assert not stage.exists()
        assert not mounts(root)
        assert our_cgroups() == []
    finally:
        await rt.stop()


async def test_grading_tools_run_in_a_host_sandbox(local: LocalRuntime) -> None:
    spec = EnvironmentSpec(
        files={"test_it.py": "def test_ok():\n    assert 1 + 1 == 2\n"},
        setup=["git init -q && git add -A && git -c user.name=a -c user.email=a@b commit -qm init"],
    )
    async with await local.create(spec) as sb:
        graded = await sb.exec("python3 -m pytest -q -p no:cacheprovider test_it.py")
        assert graded.ok, graded.stdout + graded.stderr
        assert "1 passed" in graded.stdout
        assert (await sb.exec("git log --oneline | wc -l")).stdout.strip() == "1"


async def test_terminal_runs_an_interactive_shell(local: LocalRuntime) -> None:
    async with await local.create(EnvironmentSpec()) as sb:
        term = sb.open_terminal(["/bin/sh", "-i"], rows=30, cols=100)
        term.write(b"echo $((6*7)); tty; stty size\nexit 3\n")
        out = b""
        while (chunk := await asyncio.wait_for(term.read(), 30)) is not None:
            out += chunk
        assert b"42" in out
        assert b"/dev/pts/" in out
        assert b"30 100" in out
        assert term.exit_code == 3


async def test_create_after_stop_is_refused(tmp_path: Path) -> None:
    rt = local_runtime(tmp_path)
    async with rt:
        pass
    with pytest.raises(SandboxStartError, match="stopped"):
        await rt.create(EnvironmentSpec())
    async with rt, await rt.create(EnvironmentSpec()) as sb:  # start() again is fine
        assert (await sb.exec("echo back")).stdout == "back\n"


async def test_exec_server_parts_run_from_source_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the sandbox's python has another bytecode format the server's parts
    go in as source; every part must work there as it does precompiled."""
    from megaflow.environment.local import launcher

    def source_only() -> launcher.ServerPayload:
        here = Path(launcher.__file__).parent
        return launcher.ServerPayload(
            b"\0".join((here / p).read_bytes() for p in launcher.SERVER_PARTS), False
        )

    monkeypatch.setattr(launcher, "server_payload", source_only)
    rt = local_runtime(tmp_path)
    async with rt, await rt.create(EnvironmentSpec(files={"in.txt": "x"})) as sb:
        assert (await sb.exec("echo ok; id -u")).stdout == "ok\n1000\n"  # server_jobs
        await sb.write_file("out/f.txt", b"written")  # server_files
        assert await sb.read_file("out/f.txt") == b"written"
        assert (await sb.exec("sleep 30", timeout=0.2)).timed_out  # the poll loop's deadlines


async def test_a_nested_workdir_is_reachable_by_the_agent(local: LocalRuntime) -> None:
    spec = EnvironmentSpec(workdir="/opt/deep/ws", files={"f.txt": "here\n"})
    async with await local.create(spec) as sb:
        result = await sb.exec("pwd; cat f.txt; stat -c %a /opt/deep")
        assert result.stdout == "/opt/deep/ws\nhere\n755\n", result


async def test_commands_get_default_signals_whatever_the_host_ignores(
    local: LocalRuntime,
) -> None:
    """A host started in the background or under nohup ignores SIGINT/SIGHUP, and
    ignored signals survive exec: the sandbox's commands must start at the defaults."""
    import signal

    sigs = (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP)
    saved = {sig: signal.signal(sig, signal.SIG_IGN) for sig in sigs}
    try:
        async with await local.create(EnvironmentSpec()) as box:
            for name in ("INT", "QUIT", "HUP"):
                res = await box.exec(f"kill -{name} $$; echo survived")
                assert "survived" not in res.stdout, (name, res)
    finally:
        for sig, old in saved.items():
            signal.signal(sig, old)

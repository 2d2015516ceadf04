"""What a local sandbox must not be able to do, each one its own test."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from megaflow.environment.abstract import EnvironmentSpec, SandboxResources
from megaflow.environment.local import LocalRuntime, LocalSandbox
from tests.environment.conftest import local_runtime


@pytest.fixture(autouse=True)
def checkout(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A git checkout the runtime is started in, made outside /tmp: a sandbox's
    /tmp is private, so a checkout under /tmp would be hidden for that reason
    alone and prove nothing about hiding the checkout itself."""
    root = Path(tempfile.mkdtemp(prefix="megaflow-checkout-", dir="/var/tmp"))
    root.chmod(0o755)  # readable by everyone: only hiding keeps it from a sandbox
    (root / ".git").mkdir()
    (root / "pyproject.toml").write_text('[build-system]\nrequires = ["megaflow"]\n')
    monkeypatch.chdir(root)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
async def sandbox(tmp_path: Path, checkout: Path) -> AsyncIterator[LocalSandbox]:
    """A sandbox of a runtime that binds the checkout's parent (so hiding the
    checkout itself is what keeps it out, not the allow list)."""
    rt = local_runtime(tmp_path, host_paths=[str(checkout.parent)])
    async with rt, await rt.create(EnvironmentSpec()) as sb:
        yield sb


async def test_cannot_read_root_home(sandbox: LocalSandbox) -> None:
    assert any(Path("/root").iterdir()), "the host's /root should have something to hide"
    result = await sandbox.exec("ls -A /root; cat /root/.bashrc /root/.profile")
    assert result.stdout.strip() == ""
    assert result.exit_code != 0


async def test_cannot_read_host_secrets(sandbox: LocalSandbox) -> None:
    assert Path("/etc/shadow").stat().st_size > 0
    result = await sandbox.exec("cat /etc/shadow /etc/gshadow; ls -A /etc/ssh 2>/dev/null")
    assert result.stdout == ""


async def test_cannot_read_project_checkout(sandbox: LocalSandbox, checkout: Path) -> None:
    assert (checkout / "pyproject.toml").exists()
    result = await sandbox.exec(f"cat {checkout}/pyproject.toml; ls -A {checkout}")
    assert "megaflow" not in result.stdout
    assert result.stdout.strip() == ""


async def test_cannot_unmount_what_hides_host_paths(sandbox: LocalSandbox, checkout: Path) -> None:
    result = await sandbox.exec(
        f"umount {checkout}; umount -l {checkout}; mount -o remount,rw /; ls -A {checkout}"
    )
    assert result.stdout.strip() == ""
    assert any(w in result.stderr for w in ("ermission denied", "not permitted", "superuser"))
    caps = await sandbox.exec("grep CapEff /proc/self/status")
    cap_sys_admin = 1 << 21
    assert not int(caps.stdout.split()[1], 16) & cap_sys_admin
    # not even through the system call, bypassing umount(8)'s own checks
    direct = (
        "import ctypes,sys;libc=ctypes.CDLL(None,use_errno=True)\n"
        f"print(libc.umount2(b'{checkout}',2), ctypes.get_errno())"
    )
    assert (await sandbox.exec(["python3", "-c", direct])).stdout.split() == ["-1", "1"]


async def test_cannot_write_etc_or_host_paths(sandbox: LocalSandbox, tmp_path: Path) -> None:
    result = await sandbox.exec("echo x > /etc/megaflow-probe; echo x > /usr/megaflow-probe")
    assert result.exit_code != 0
    assert "Read-only file system" in result.stderr
    assert not Path("/etc/megaflow-probe").exists()
    assert not Path("/usr/megaflow-probe").exists()
    # the sandbox's /tmp is its own, not the host's
    await sandbox.exec(f"mkdir -p {tmp_path} && echo x > {tmp_path}/probe")
    assert not (tmp_path / "probe").exists()


async def test_cannot_see_host_processes(sandbox: LocalSandbox) -> None:
    result = await sandbox.exec("ls /proc | grep -E '^[0-9]+$' | wc -l; cat /proc/1/cmdline")
    count = int(result.stdout.split()[0])
    assert count < 10, result.stdout
    assert str(os.getpid()) not in (await sandbox.exec("ls /proc")).stdout.split()
    names = set((await sandbox.exec("cat /proc/[0-9]*/comm")).stdout.split())
    assert names <= {"bwrap", "python3", "sh", "cat"}, names


async def test_no_network_by_default(sandbox: LocalSandbox) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    try:
        probe = (  # socket() itself is refused (seccomp); a connect would find no one
            "import socket,sys\n"
            f"try:\n s=socket.socket();s.settimeout(2);s.connect(('127.0.0.1',{port}))\n"
            " print('connected')\n"
            "except OSError as e:\n print('refused', e)\n"
        )
        result = await sandbox.exec(["python3", "-c", probe])
        assert result.stdout.startswith("refused"), result
        links = await sandbox.exec("cat /proc/net/dev")
        assert "eth" not in links.stdout
    finally:
        server.close()


async def test_host_network_when_asked(local: LocalRuntime) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    try:
        async with await local.create(EnvironmentSpec(network="host")) as sb:
            probe = f"import socket;socket.create_connection(('127.0.0.1',{port}),2);print('ok')"
            assert (await sb.exec(["python3", "-c", probe])).stdout == "ok\n"
    finally:
        server.close()


@pytest.mark.slow
async def test_fork_bomb_is_stopped_by_pids_limit(local: LocalRuntime) -> None:
    spec = EnvironmentSpec(resources=SandboxResources(pids=64))
    async with await local.create(spec) as sb:
        bomb = "bomb() { bomb | bomb & }; bomb; sleep 1; ls /proc | grep -cE '^[0-9]+$'"
        await sb.exec(bomb, timeout=5)
        assert (await sb.stats()).pids <= 64
        assert sb.cgroup is not None
        events = (sb.cgroup.dirs["pids"] / "pids.events").read_text().split()
        assert int(events[events.index("max") + 1]) > 0, "the pids limit was never hit"
        await sb.reset()
        assert (await sb.exec("echo alive")).stdout == "alive\n"


@pytest.mark.slow
async def test_memory_hog_is_killed_and_others_carry_on(local: LocalRuntime) -> None:
    hog_spec = EnvironmentSpec(resources=SandboxResources(memory_mb=64))
    async with (
        await local.create(hog_spec) as hog,
        await local.create(EnvironmentSpec()) as other,
    ):
        hog_cmd = ["python3", "-c", "b=[]\nwhile True: b.append(bytearray(8<<20))"]
        busy = other.exec("for i in 1 2 3 4 5; do echo $i; sleep 0.1; done")
        hogged, steady = await asyncio.gather(hog.exec(hog_cmd, timeout=30), busy)
        assert hogged.exit_code == 137, hogged  # SIGKILL by the OOM killer
        assert not hogged.timed_out
        assert steady.stdout.split() == ["1", "2", "3", "4", "5"]
        assert (await hog.exec("echo still-here")).stdout == "still-here\n"
        assert (await hog.stats()).memory_peak_bytes <= 64 * 1024 * 1024


async def test_commands_not_the_exec_server_are_what_the_oom_killer_takes(
    sandbox: LocalSandbox,
) -> None:
    # the shell ($$) runs cat; the shell's parent ($PPID) is the exec server, or
    # its spawner (the agent's uid, as the commands it starts), whose parent it is
    server = (
        "s=$PPID; if [ $(awk '/^Uid:/ {print $2}' /proc/$s/status) != 0 ]; then "
        "cat /proc/$s/oom_score_adj; s=$(awk '/^PPid:/ {print $2}' /proc/$s/status); fi; "
    )
    out = await sandbox.exec(
        server + "cat /proc/self/oom_score_adj /proc/$$/oom_score_adj /proc/$s/oom_score_adj"
        " /proc/$s/comm; echo $s"
    )
    assert out.stdout.split()[-5:] == ["1000", "1000", "0", "python3", "2"], out


async def test_endless_loop_is_killed_by_timeout(sandbox: LocalSandbox) -> None:
    result = await sandbox.exec("while :; do :; done", timeout=0.5)
    assert result.timed_out
    assert result.exit_code == 137
    assert 0.4 < result.duration_s < 30
    assert (await sandbox.exec("echo next")).stdout == "next\n"


@pytest.mark.slow
async def test_stdout_flood_is_truncated(sandbox: LocalSandbox) -> None:
    result = await sandbox.exec("head -c 100000000 /dev/zero | tr '\\0' x", timeout=60)
    assert result.exit_code == 0
    assert result.truncated
    assert len(result.stdout) == 1024 * 1024


async def test_cannot_see_other_sandboxes(local: LocalRuntime) -> None:
    async with (
        await local.create(EnvironmentSpec()) as a,
        await local.create(EnvironmentSpec()) as b,
    ):
        await b.write_file("secret.txt", b"b's secret")
        assert (local.sandbox_root / b.id / "rw" / "ws" / "secret.txt").exists()
        result = await a.exec(
            f"ls -A {local.root}; cat {local.sandbox_root}/{b.id}/rw/ws/secret.txt"
        )
        assert "secret" not in result.stdout
        assert result.exit_code != 0


async def test_loopback_network_is_private(local: LocalRuntime) -> None:
    serve = (
        "import socket\ns=socket.socket();s.bind(('127.0.0.1',8765));s.listen()\n"
        "c=socket.create_connection(('127.0.0.1',8765));print('own loopback ok')"
    )
    async with await local.create(EnvironmentSpec(network="loopback")) as sb:
        assert (await sb.exec(["python3", "-c", serve])).stdout == "own loopback ok\n"


async def test_checkout_is_readable_only_when_given(tmp_path: Path, checkout: Path) -> None:
    rt = local_runtime(tmp_path, hide_checkout=False, host_paths=[str(checkout)])
    async with rt, await rt.create(EnvironmentSpec()) as sb:
        result = await sb.exec(f"head -c 11 {checkout}/pyproject.toml; touch {checkout}/x")
        assert result.stdout == "[build-syst"
        assert "Read-only file system" in result.stderr

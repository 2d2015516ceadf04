"""The one contract every runtime keeps: the same tests, parametrized over runtimes."""

from __future__ import annotations

import io
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from megaflow.core.errors import NotFound, SandboxError
from megaflow.environment.abstract import SandboxResources
from tests.environment.conftest import Target

SPEC = {"files": {"hello.txt": "hi there\n"}, "env": {"GREETING": "hello"}}


async def test_exec_returns_exit_code_and_both_streams(target: Target) -> None:
    async with await target.runtime.create(target.spec(**SPEC), owner="t-exec") as sb:
        result = await sb.exec("echo out; echo err >&2; exit 3")
        assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
        assert not result.ok
        assert not result.truncated
        assert not result.timed_out
        assert result.duration_s > 0


async def test_exec_argv_env_cwd_and_spec_files(target: Target) -> None:
    async with await target.runtime.create(target.spec(**SPEC)) as sb:
        assert (await sb.exec(["cat", "hello.txt"])).stdout == "hi there\n"
        env = await sb.exec("echo $GREETING $EXTRA", env={"EXTRA": "world"})
        assert env.stdout == "hello world\n"
        await sb.exec("mkdir -p sub/dir")
        assert (await sb.exec("pwd", cwd="sub/dir")).stdout.strip() == "/workspace/sub/dir"


async def test_exec_output_is_capped(target: Target) -> None:
    async with await target.runtime.create(target.spec(**SPEC)) as sb:
        result = await sb.exec("yes abcdefgh | head -c 100000", output_cap=1000, timeout=20)
        assert len(result.stdout) == 1000
        assert result.truncated
        assert not result.timed_out  # `yes` dies of SIGPIPE once `head` is done


async def test_exec_timeout_kills_the_process_group(target: Target) -> None:
    async with await target.runtime.create(target.spec(**SPEC)) as sb:
        result = await sb.exec("sleep 30 & sleep 30; echo never", timeout=0.5)
        assert result.timed_out
        assert "never" not in result.stdout
        left = await sb.exec("ps -o comm | grep -c sleep || true")
        assert left.stdout.strip() == "0"


async def test_files_round_trip(target: Target) -> None:
    async with await target.runtime.create(target.spec(**SPEC)) as sb:
        await sb.write_file("a/b/c.bin", b"\x00\x01binary\xff", mode=0o600)
        assert await sb.read_file("a/b/c.bin") == b"\x00\x01binary\xff"
        assert (await sb.exec("stat -c %a a/b/c.bin")).stdout.strip() == "600"
        with pytest.raises(NotFound):
            await sb.read_file("missing.txt")


async def test_upload_and_download_directory_as_tar(target: Target) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in {"pkg/x.py": b"x = 1\n", "pkg/y/z.txt": b"zz"}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    async with await target.runtime.create(target.spec(**SPEC)) as sb:
        await sb.upload(buf.getvalue(), "up")
        assert (await sb.exec("cat up/pkg/y/z.txt")).stdout == "zz"
        with tarfile.open(fileobj=io.BytesIO(await sb.download("up/pkg"))) as tar:
            names = set(tar.getnames())
            member = tar.extractfile("pkg/x.py")
            assert member is not None
            assert member.read() == b"x = 1\n"
        assert {"pkg", "pkg/x.py", "pkg/y", "pkg/y/z.txt"} <= names


async def test_reset_restores_state_after_setup_and_kills_processes(target: Target) -> None:
    spec = target.spec(files={"keep.txt": "v1"}, setup=["echo from-setup > setup.txt"])
    async with await target.runtime.create(spec) as sb:
        await sb.exec("echo v2 > keep.txt; touch junk; echo tmp > /tmp/t; rm setup.txt")
        await sb.exec("sleep 1000 > /dev/null 2>&1 &")
        await sb.reset()
        assert (await sb.exec("cat keep.txt setup.txt")).stdout == "v1from-setup\n"
        assert (await sb.exec("ls junk /tmp/t")).exit_code != 0
        assert (await sb.exec("ps -o comm | grep -c sleep || true")).stdout.strip() == "0"


async def test_kill_processes_keeps_files(target: Target) -> None:
    async with await target.runtime.create(target.spec(files={"keep.txt": "v1"})) as sb:
        await sb.exec("echo v2 > keep.txt; sleep 1000 > /dev/null 2>&1 &")
        await sb.exec("(setsid sleep 999 > /dev/null 2>&1 &) &")
        wait = "i=0; while [ $(ps -o comm | grep -c sleep) -lt 2 ] && [ $i -lt 50 ]; do"
        await sb.exec(wait + " sleep 0.1; i=$((i+1)); done")
        assert (await sb.exec("ps -o comm | grep -c sleep || true")).stdout.strip() == "2"
        await sb.kill_processes()
        assert (await sb.exec("ps -o comm | grep -c sleep || true")).stdout.strip() == "0"
        assert (await sb.exec("cat keep.txt")).stdout == "v2\n"


async def test_failed_setup_is_a_start_error_and_leaves_nothing(target: Target) -> None:
    with pytest.raises(SandboxError, match="setup"):
        await target.runtime.create(target.spec(setup=["echo broken >&2; exit 7"]))
    assert await target.runtime.list() == []


async def test_list_destroy_is_idempotent(target: Target) -> None:
    a = await target.runtime.create(target.spec(**SPEC), owner="task-a")
    b = await target.runtime.create(target.spec(**SPEC), owner="task-b")
    infos = {i.id: i for i in await target.runtime.list()}
    assert set(infos) == {a.id, b.id}
    assert infos[a.id].owner == "task-a"
    assert infos[a.id].deadline > infos[a.id].created_at
    await a.destroy()
    await a.destroy()
    await target.runtime.destroy(a.id)
    await target.runtime.destroy("no-such-sandbox")
    assert [i.id for i in await target.runtime.list()] == [b.id]
    with pytest.raises(SandboxError):
        await a.exec("true")
    await b.destroy()


async def test_stats_report_memory_and_pids(target: Target) -> None:
    async with await target.runtime.create(target.spec(**SPEC)) as sb:
        await sb.exec("sleep 5 > /dev/null 2>&1 &")
        stats = await sb.stats()
        assert stats.memory_bytes > 0
        assert stats.pids >= 2
        assert stats.cpu_seconds > 0


async def test_concurrent_execs_in_one_sandbox(target: Target) -> None:
    import asyncio

    async with await target.runtime.create(target.spec(**SPEC)) as sb:
        results = await asyncio.gather(*(sb.exec(f"sleep 0.2; echo {i}") for i in range(8)))
        assert [r.stdout.strip() for r in results] == [str(i) for i in range(8)]


async def test_exec_without_timeout(target: Target) -> None:
    async with await target.runtime.create(target.spec(**SPEC)) as sb:
        result = await sb.exec("sleep 0.1; echo done", timeout=None)
        assert (result.stdout, result.timed_out) == ("done\n", False)


# -- the same defences in every runtime ---------------------------------------------
# The attack: a new user namespace (where the process is root with every capability),
# and in it a mount. Run as-is on the host (no sandbox), it succeeds.
ESCAPE = 'mkdir -p "$0" && unshare -Urm sh -c \'mount -t tmpfs t "$0" && echo ESCAPED\' "$0"'


def test_the_escape_works_where_no_sandbox_holds_it(tmp_path: Path) -> None:
    if shutil.which("unshare") is None:
        pytest.skip("no unshare on this host")
    done = subprocess.run(["sh", "-c", ESCAPE, str(tmp_path / "m")], capture_output=True, text=True)
    if done.returncode != 0 and "Operation not permitted" in done.stderr:
        pytest.skip(f"this host itself refuses new user namespaces: {done.stderr}")
    assert done.stdout.strip() == "ESCAPED", done.stderr


def not_yet(request: pytest.FixtureRequest, why: str, *runtimes: str) -> None:
    """Mark this runtime's run of the test as a known failure: strict, so the day the
    runtime keeps the defence the mark must go."""
    if request.node.callspec.params.get("target") in runtimes:
        request.node.add_marker(pytest.mark.xfail(strict=True, reason=why))


async def test_no_new_user_namespace_and_no_mount(target: Target) -> None:
    async with await target.runtime.create(target.spec(**SPEC)) as sb:
        attack = await sb.exec(["sh", "-c", ESCAPE, "/tmp/m"])
        assert "ESCAPED" not in attack.stdout, attack
        assert attack.exit_code != 0, attack
        direct = await sb.exec("unshare -U true")
        assert direct.exit_code != 0, direct
        mount = await sb.exec("mkdir -p /tmp/n && mount -t tmpfs t /tmp/n && echo MOUNTED")
        assert "MOUNTED" not in mount.stdout, mount


# Every place a process in a sandbox might write (the workspace is "."), 32 MiB each.
SPOTS = (".", "/tmp", "/var/tmp", "/root", "/home", "/run", "/dev/shm", "/", "/etc", "/usr",
         "/opt", "/.megaflow")  # fmt: skip
FILL = (
    'for d in "$@"; do f="$d/megaflow-fill"; dd if=/dev/zero of="$f" bs=1M count=32 '
    '2>/dev/null; echo "$d $(wc -c < "$f" 2>/dev/null || echo 0)"; rm -f "$f"; done'
)


async def _written(target: Target, **resources: int) -> dict[str, int]:
    spec = target.spec(**SPEC, resources=SandboxResources(memory_mb=512, **resources))
    async with await target.runtime.create(spec) as sb:
        out = await sb.exec(["sh", "-c", FILL, "fill", *SPOTS], timeout=120)
    got = dict(line.rsplit(" ", 1) for line in out.stdout.splitlines())
    assert set(got) == set(SPOTS), out
    return {d: int(n) for d, n in got.items()}


async def test_disk_mb_bounds_every_writable_path(target: Target) -> None:
    unbounded = await _written(target)  # the attack takes 32 MiB where nothing bounds it
    assert unbounded["."] == 32 << 20, unbounded
    bounded = await _written(target, disk_mb=8)
    over = {d: n for d, n in bounded.items() if n > 8 << 20}
    assert not over, f"written past disk_mb=8 MiB: {over}"

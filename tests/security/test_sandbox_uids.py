"""Sandbox root is an unprivileged host uid; agent commands run as another one.

Each test runs a scripted attacker inside a real bubblewrap sandbox.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from megaflow.core.errors import SandboxError, SandboxStartError
from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.local import LocalRuntime, LocalSandbox, userns
from tests.environment.conftest import descendants, leak_check, local, local_runtime

__all__ = ["leak_check", "local"]
BASE = 100_000


async def probe(sb: LocalSandbox, code: str) -> dict[str, object]:
    """Run python code in the sandbox as the agent; it prints one JSON line."""
    result = await sb.exec(["python3", "-c", code], timeout=30)
    assert result.exit_code == 0, result
    return json.loads(result.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.fixture
def secret_dir() -> Iterator[Path]:
    """A world-traversable host directory with a root-only file and an open one."""
    root = Path(tempfile.mkdtemp(prefix="megaflow-uid-test-", dir="/var/tmp"))
    root.chmod(0o755)
    (root / "secret").write_text("root only")
    (root / "secret").chmod(0o600)
    (root / "open").write_text("everyone")
    (root / "open").chmod(0o644)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
async def sandbox(local: LocalRuntime) -> AsyncIterator[LocalSandbox]:
    async with await local.create(EnvironmentSpec(files={"given.txt": "x"})) as sb:
        yield sb


async def test_sandbox_root_cannot_read_root_only_host_files(
    tmp_path: Path, secret_dir: Path
) -> None:
    rt = local_runtime(tmp_path, host_paths=[str(secret_dir)])
    async with rt, await rt.create(EnvironmentSpec()) as sb:
        result = await sb.exec(f"cat {secret_dir}/open; cat {secret_dir}/secret; cat /etc/shadow")
        assert result.stdout == "everyone"
        assert result.stderr.count("Permission denied") == 2, result.stderr
        with pytest.raises(SandboxError, match="ermission denied"):  # the server's file ops
            await sb.read_file(f"{secret_dir}/secret")
        # on the host, no process of the sandbox is root: bubblewrap, init, server, command
        assert sb.proc is not None
        uids = {}
        for pid in [sb.proc.pid, *descendants(sb.proc.pid)]:
            with open(f"/proc/{pid}/status") as f:
                line = next(x for x in f if x.startswith("Uid:"))
            uids[pid] = {int(u) for u in line.split()[1:]}
        assert len(uids) >= 3
        assert all(min(u) >= BASE for u in uids.values()), uids


async def test_files_made_inside_belong_to_the_agent_host_uid(sandbox: LocalSandbox) -> None:
    ws = sandbox.dir / "rw" / "ws"
    await sandbox.exec("echo hi > made.txt; mkdir d; ln -s /etc/passwd link")
    await sandbox.write_file("written.txt", b"w")
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w") as t:
        info = tarfile.TarInfo("up/loaded.txt")
        info.size, info.uid, info.mode = 1, 0, 0o4755  # root-owned setuid in the archive
        t.addfile(info, io.BytesIO(b"u"))
    await sandbox.upload(tar.getvalue(), ".")
    agent = BASE + userns.AGENT_ID
    for name in ("given.txt", "made.txt", "d", "link", "written.txt", "up", "up/loaded.txt"):
        st = os.lstat(ws / name)
        assert (st.st_uid, st.st_gid) == (agent, agent), name
    assert not os.stat(ws / "up" / "loaded.txt").st_mode & 0o7000  # setuid bit dropped
    for part in ("ws", "home", "tmp"):
        assert (sandbox.dir / "rw" / part).stat().st_uid == agent
    await sandbox.reset()  # the snapshot restore keeps owners
    assert os.lstat(ws / "given.txt").st_uid == agent
    assert not (ws / "made.txt").exists()


async def test_uid_base_is_configurable(tmp_path: Path) -> None:
    rt = local_runtime(tmp_path, uid_base=300_000)
    async with rt, await rt.create(EnvironmentSpec()) as sb:
        await sb.exec("touch f; python3 -c 'import os; os.setuid(1000)'")
        assert (sb.dir / "rw" / "ws" / "f").stat().st_uid == 301_000


async def test_agent_has_no_privileges(sandbox: LocalSandbox) -> None:
    got = await probe(
        sandbox,
        "import os,json\n"
        "st=dict(l.split(':',1) for l in open('/proc/self/status') if ':' in l)\n"
        "caps={k:int(st[k],16) for k in ('CapPrm','CapEff','CapAmb')}\n"
        "try:\n os.setuid(0); up='root'\nexcept OSError as e: up=e.errno\n"
        "print(json.dumps({'ids':[os.getuid(),os.getgid(),os.getgroups()],'caps':caps,'up':up,"
        "'home':os.access(os.environ['HOME'],os.W_OK)}))",
    )
    assert got == {
        "ids": [1000, 1000, []],
        "caps": {"CapPrm": 0, "CapEff": 0, "CapAmb": 0},
        "up": 1,  # EPERM
        "home": True,
    }


async def test_agent_cannot_reach_the_server_channel_or_signal_it(
    sandbox: LocalSandbox,
) -> None:
    attack = (
        "import os,json,signal,ctypes\n"
        "def field(pid,name):\n"
        " with open(f'/proc/{pid}/status') as f:\n"
        "  return int(next(l.split()[1] for l in f if l.startswith(name)))\n"
        "server=os.getppid(); r={}\n"
        "if field(server,'Uid:'): server=field(server,'PPid:')  # the spawner's: the agent's own\n"
        "def tr(k,f):\n"
        " try: f(); r[k]='done'\n"
        " except OSError as e: r[k]=e.errno\n"
        "tr('open server fd1',lambda: open(f'/proc/{server}/fd/1','wb').write(b'\\0'*8))\n"
        "tr('list server fds',lambda: os.listdir(f'/proc/{server}/fd'))\n"
        "tr('list init fds',lambda: os.listdir('/proc/1/fd'))\n"
        "for n in range(4): tr(f'open init fd{n}',lambda: open(f'/proc/1/fd/{n}','wb'))\n"
        "tr('server mem',lambda: open(f'/proc/{server}/mem','rb'))\n"
        "tr('server environ',lambda: open(f'/proc/{server}/environ','rb').read())\n"
        "tr('SIGSTOP server',lambda: os.kill(server,signal.SIGSTOP))\n"
        "tr('SIGKILL server',lambda: os.kill(server,signal.SIGKILL))\n"
        "tr('SIGKILL init',lambda: os.kill(1,signal.SIGKILL))\n"
        "tr('SIGKILL all',lambda: os.kill(-1,signal.SIGKILL))\n"
        "libc=ctypes.CDLL(None,use_errno=True)\n"
        "rc=libc.ptrace(16,server,0,0); r['ptrace server']=ctypes.get_errno() if rc else 'done'\n"
        "print(json.dumps({'server':server,**r}))"
    )
    got = await probe(sandbox, attack)
    server = got.pop("server")
    assert server == 2
    got.pop("SIGKILL all")  # may hit the agent's own processes; never the server (below)
    assert "done" not in got.values(), got
    assert set(got.values()) <= {1, 13}, got  # EPERM / EACCES
    # the host's results are unaffected and the server is alive and answering
    echo = await sandbox.exec("echo still fine")
    assert echo.stdout == "still fine\n"
    assert (await sandbox.read_file("given.txt")) == b"x"


async def test_file_ops_run_as_the_agent(sandbox: LocalSandbox) -> None:
    with pytest.raises(SandboxError, match="ermission denied"):
        await sandbox.read_file("/proc/1/environ")  # init's, readable by its owner only
    with pytest.raises(SandboxError):
        await sandbox.write_file("/etc/megaflow-probe", b"x")
    await sandbox.exec("ln -s /etc evil")
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w") as t:
        info = tarfile.TarInfo("evil/owned")
        info.size = 1
        t.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(SandboxError):  # through the agent's own symlink: only where it may
        await sandbox.upload(tar.getvalue(), ".")
    assert not Path("/etc/owned").exists()


def _tar(*members: tuple[str, str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as t:
        for name, kind, data in members:
            info = tarfile.TarInfo(name)
            if kind == "sym":
                info.type, info.linkname = tarfile.SYMTYPE, data.decode()
            elif kind == "hard":
                info.type, info.linkname = tarfile.LNKTYPE, data.decode()
            elif kind == "dev":
                info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 3
            else:
                info.size = len(data)
            t.addfile(info, io.BytesIO(data) if kind == "file" else None)
    return out.getvalue()


@pytest.mark.parametrize(
    "members",
    [
        [("../escape", "file", b"x")],
        [("/abs", "file", b"x")],
        [("link", "sym", b"/tmp"), ("link/through", "file", b"x")],
        [("link", "sym", b"sub/../../.."), ("ok", "file", b"x")],
        [("d/link", "sym", b"../.."), ("d/link/x", "file", b"x")],
        [("hard", "hard", b"../../etc/passwd")],
        [("null", "dev", b"")],
    ],
    ids=["dotdot", "absolute", "symlink-then-file", "symlink-out", "nested", "hardlink", "dev"],
)
async def test_upload_refuses_escaping_members(
    sandbox: LocalSandbox, members: list[tuple[str, str, bytes]]
) -> None:
    await sandbox.exec("mkdir -p sub/deeper")
    with pytest.raises(SandboxError, match="refusing tar member"):
        await sandbox.upload(_tar(*members), "sub/deeper")
    listing = await sandbox.exec("find / -xdev -newer given.txt -name 'through' -o -name x")
    assert "through" not in listing.stdout


async def test_upload_keeps_links_inside(sandbox: LocalSandbox) -> None:
    await sandbox.upload(_tar(("a", "file", b"x"), ("b", "sym", b"a"), ("c", "hard", b"a")), "t")
    assert (await sandbox.exec("cat t/b t/c")).stdout == "xx"


def test_unprivileged_host_needs_a_subuid_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(userns.os, "getuid", lambda: 4321)
    monkeypatch.setattr(userns.os, "getgid", lambda: 4321)
    (tmp_path / "subuid").write_text("other:100000:65536\n")
    (tmp_path / "subgid").write_text("other:100000:65536\n")
    with pytest.raises(SandboxStartError, match="subuid"):
        userns.id_map(BASE, tmp_path)
    (tmp_path / "subuid").write_text("4321:200000:65536\n")
    (tmp_path / "subgid").write_text("4321:300000:65536\n")
    ids = userns.id_map(BASE, tmp_path)
    assert ids.helpers
    assert ids.run_as is None
    assert (ids.agent_uid, ids.agent_gid) == (4321, 4321)
    assert ids.uid_lines.split("\n")[:3] == ["0 200000 1000", "1000 4321 1", "1001 201001 64535"]
    assert ids.gid_lines.startswith("0 300000 1000\n1000 4321 1\n")


async def test_agent_reaches_a_nested_workdir(local: LocalRuntime) -> None:
    spec = EnvironmentSpec(workdir="/home/agent/project", files={"a.txt": "in"})
    async with await local.create(spec) as sb:
        result = await sb.exec("pwd; cat a.txt; touch b; ls -ld /home/agent | cut -c1-10")
        assert result.stdout == "/home/agent/project\nindrwxr-xr-x\n", result

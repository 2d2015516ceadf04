"""Killing every process of a sandbox: by construction, never by reading /proc.

Scripted attackers hide from a kill that decides what is alive by walking
``/proc`` (the exec server's old kill, kept here as ``PROC_WALK_KILL``): a
process whose leader thread exited while another thread runs on (``/proc``
says zombie) under a name holding ``) Z (``, a SIGSTOPped one, a setsid
double-forked daemon, a pid-hopping fork loop, and a fork bomb filling the
pids limit. Each is first shown alive in the sandbox's cgroup (the disguised
one surviving the ``/proc`` walk), then gone after ``kill_processes()``, with
the cgroup holding only bubblewrap, the sandbox's init and the exec server.
Both layers are tested on their own: the exec server's ``kill(-1)`` in the
sandbox's pid namespace, and the host's freeze-and-kill through the cgroup.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from megaflow.core.errors import SandboxError
from megaflow.environment.abstract import EnvironmentSpec, SandboxResources
from megaflow.environment.config import PoolConfig
from megaflow.environment.local import LocalRuntime, LocalSandbox, freezer
from megaflow.environment.pool import SandboxPool
from tests.environment.conftest import leak_check, local, local_runtime

__all__ = ["leak_check", "local"]

SPEC = EnvironmentSpec(files={"task.md": "t"}, resources=SandboxResources(pids=64))
# Its leader thread exits (SYS_exit, not exit_group): /proc/<pid>/stat says Z,
# while the second thread keeps beating.
ZOMBIE_LEADER = r"""
import ctypes, os, platform, threading, time
libc = ctypes.CDLL(None)
libc.prctl(15, b"x) Z (", 0, 0, 0)
open("/tmp/zl.pid", "w").write(str(os.getpid()))
def beat():
    while True:
        open("/tmp/beat", "a").write(".")
        time.sleep(0.02)
threading.Thread(target=beat).start()
time.sleep(0.1)
libc.syscall(60 if platform.machine() == "x86_64" else 93, 0)
"""
DAEMON = (
    "import os, time\nif os.fork(): os._exit(0)\nos.setsid()\n"
    "if os.fork(): os._exit(0)\ntime.sleep(1000)"
)
HOPPER = "import os\nwhile True:\n    if os.fork(): os._exit(0)"
PLANT = (
    f"setsid python3 -c '{ZOMBIE_LEADER}' >/dev/null 2>&1 &\n"
    "sleep 1000 >/dev/null 2>&1 & kill -STOP $!\n"
    f"python3 -c '{DAEMON}' >/dev/null 2>&1 &\n"
    f"setsid python3 -c '{HOPPER}' >/dev/null 2>&1 &\n"
    "echo planted"
)
# The exec server's kill before this change, run here as the agent (who may
# signal its own processes): list /proc, skip what looks like a zombie, kill.
PROC_WALK_KILL = r"""
import os, signal, time
keep = {1, 2, os.getpid(), os.getppid()}
def looks_dead(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return True
for _ in range(200):
    alive = [p for p in map(int, filter(str.isdigit, os.listdir("/proc")))
             if p not in keep and not looks_dead(p)]
    if not alive:
        break
    for pid in alive:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    time.sleep(0.002)
"""


def others(sb: LocalSandbox) -> set[int]:
    """Host pids in the sandbox's cgroup besides bubblewrap, init and the server."""
    assert sb.cgroup is not None
    assert sb.cgroup.kept is not None
    return sb.cgroup.pids_in() - sb.cgroup.kept


def spawner(sb: LocalSandbox) -> set[int]:
    """The exec server's spawner, if it runs (spawn mode, after an exec): the
    server's child running the server's own command line, as the agent."""
    assert sb.cgroup is not None
    assert sb.cgroup.kept is not None
    (server,) = [p for p in sb.cgroup.kept if _nspid(p) == 2]
    line = Path(f"/proc/{server}/cmdline").read_bytes()
    return {p for p in others(sb) if _status(p, "PPid:") == server
            and _status(p, "Uid:") != _status(server, "Uid:")
            and Path(f"/proc/{p}/cmdline").read_bytes() == line}  # fmt: skip


def _status(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for {pid}")


def only_kept(sb: LocalSandbox) -> bool:
    assert sb.cgroup is not None
    return others(sb) == set() and freezer.tasks(sb.cgroup.dirs["pids"]) == sb.cgroup.kept_tasks


async def planted(sb: LocalSandbox) -> int:
    """Start the attackers; the host pid of the disguised one, seen alive."""
    assert (await sb.exec(PLANT)).stdout == "planted\n"
    for _ in range(100):
        pid = (await sb.exec("cat /tmp/zl.pid 2>/dev/null; echo")).stdout.strip()
        state = (await sb.exec(f"cut -d' ' -f3- /proc/{pid or 0}/stat 2>/dev/null")).stdout
        if state.startswith("Z") and len(others(sb)) >= 5:
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the attackers did not start")
    assert state.startswith("Z ")  # the /proc walk sees a zombie: it is not
    assert (await sb.exec(f"cat /proc/{pid}/comm")).stdout == "x) Z (\n"
    beats = (await sb.exec("wc -c < /tmp/beat")).stdout
    await asyncio.sleep(0.1)
    assert (await sb.exec("wc -c < /tmp/beat")).stdout != beats  # its thread runs
    ps = (await sb.exec(["ps", "-eo", "stat=,args="])).stdout
    assert any(line.startswith("T") and "sleep 1000" in line for line in ps.splitlines()), ps
    assert "time.sleep(1000)" in ps
    (host_pid,) = [p for p in others(sb) if _nspid(p) == int(pid)]
    return host_pid


def _nspid(host_pid: int) -> int:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{host_pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    return -1


@contextlib.asynccontextmanager
async def pooled(rt: LocalRuntime, mode: str, warm: float) -> AsyncIterator[LocalSandbox]:
    cfg = PoolConfig(min=0, max=2, warm_share=warm)
    async with SandboxPool(rt, mode, cfg) as pool:  # type: ignore[arg-type]
        sb = await pool.acquire(SPEC, owner="attacker")
        assert isinstance(sb, LocalSandbox)
        try:
            yield sb
        finally:
            await pool.release(sb)


@pytest.mark.parametrize("warm", [0.0, 1.0])
@pytest.mark.parametrize("mode", ["ephemeral", "persistent"])
async def test_disguised_processes_outlive_a_proc_walk_but_not_kill_processes(
    local: LocalRuntime, mode: str, warm: float
) -> None:
    async with pooled(local, mode, warm) as sb:
        disguised = await planted(sb)
        assert (await sb.exec(["python3", "-c", PROC_WALK_KILL], timeout=60)).ok
        await asyncio.sleep(0.1)
        assert disguised in others(sb)  # the /proc walk took it for a zombie
        await sb.kill_processes()
        assert only_kept(sb), others(sb)
        beats = (await sb.exec("wc -c < /tmp/beat; sleep 0.1; wc -c < /tmp/beat")).stdout
        assert len(set(beats.split())) == 1  # nothing beats any more
        assert (await sb.exec("cat task.md")).stdout == "t"  # the sandbox works on


async def test_the_exec_servers_kill_alone_ends_them(local: LocalRuntime) -> None:
    """The pid namespace's kill(-1), without the host's check behind it."""
    async with await local.create(SPEC) as sb:
        await planted(sb)
        assert sb.channel is not None
        await sb.channel.call({"op": "kill"}, timeout=30)
        assert only_kept(sb), others(sb)


async def test_the_hosts_freeze_and_kill_alone_ends_them(
    local: LocalRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cgroup's freeze-and-kill, without the exec server's kill before it;
    every SIGKILL it sends goes to a frozen group."""
    sent: list[str] = []
    real_kill = os.kill

    def kill(pid: int, sig: int) -> None:
        assert sb.cgroup is not None
        assert sb.cgroup.freeze_dir is not None
        sent.append((sb.cgroup.freeze_dir / "freezer.state").read_text().strip())
        real_kill(pid, sig)

    async with await local.create(SPEC) as sb:
        await planted(sb)
        assert sb.cgroup is not None
        monkeypatch.setattr(os, "kill", kill)
        assert await asyncio.to_thread(sb.cgroup.end_others)
        monkeypatch.undo()
        assert only_kept(sb), others(sb)
        assert sent, "nothing was killed: the attackers were gone already"
        assert set(sent) == {"FROZEN"}, sent


async def test_kill_processes_ends_what_the_exec_servers_kill_missed(
    local: LocalRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exec server whose kill ended nothing: the host's check of the cgroup
    sees the survivors and ends them, and the sandbox is kept."""
    async with await local.create(SPEC) as sb:
        await planted(sb)
        assert sb.channel is not None
        real = sb.channel.call

        async def call(
            head: dict[str, Any], body: bytes = b"", timeout: float | None = None
        ) -> Any:
            if head["op"] == "kill":
                return {"id": 0}, b""  # answered, killed nothing
            return await real(head, body, timeout=timeout)

        monkeypatch.setattr(sb.channel, "call", call)
        await sb.kill_processes()
        assert only_kept(sb), others(sb)
        assert sb.info.state != "stopped"


async def test_a_fork_bomb_in_the_pids_limit_is_ended(local: LocalRuntime) -> None:
    bomb = "import os, time\nwhile True:\n    try: os.fork()\n    except OSError: time.sleep(0.01)"
    async with await local.create(SPEC) as sb:
        await sb.exec(f"setsid python3 -c '{bomb}' >/dev/null 2>&1 &")
        for _ in range(100):
            assert sb.cgroup is not None
            if freezer.tasks(sb.cgroup.dirs["pids"]) >= SPEC.resources.pids:
                break
            await asyncio.sleep(0.05)
        # no room for even one more process: the command's failure, not the sandbox's
        full = await sb.exec("true")
        assert full.exit_code == 126, full
        assert "Resource temporarily unavailable" in full.stderr, full
        await sb.kill_processes()
        assert only_kept(sb), others(sb)
        assert (await sb.exec("echo ok")).stdout == "ok\n"


async def test_a_sandbox_whose_kill_leaves_a_survivor_is_destroyed(
    local: LocalRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with await local.create(SPEC) as sb:
        await sb.exec("setsid sleep 1000 >/dev/null 2>&1 &")
        assert sb.cgroup is not None
        monkeypatch.setattr(sb.cgroup, "only_kept", lambda: False)
        monkeypatch.setattr(sb.cgroup, "end_others", lambda: False)
        with pytest.raises(SandboxError, match="outlived the kill"):
            await sb.kill_processes()
        assert sb.info.state == "stopped"
        assert sb.id not in local.sandboxes


async def test_without_cgroups_kill_still_works_and_reset_destroys(tmp_path: Path) -> None:
    rt = local_runtime(tmp_path, cgroups="off")
    async with rt, await rt.create(SPEC) as sb:
        await sb.exec("setsid sleep 1000 >/dev/null 2>&1 &")
        await sb.kill_processes()  # the pid namespace's kill(-1)
        assert "sleep" not in (await sb.exec(["ps", "-eo", "args="])).stdout
        with pytest.raises(SandboxError, match="cannot be reset without cgroups"):
            await sb.reset()
        assert sb.info.state == "stopped"


async def test_agent_processes_cannot_leave_their_cgroup(tmp_path: Path) -> None:
    # Where a cgroup file system is writable (the host, as root), one write moves
    # a sandbox process out of its groups, out of the host's view of the sandbox.
    rt = local_runtime(tmp_path, host_paths=["/sys/fs/cgroup"])
    async with rt, await rt.create(SPEC) as sb:
        await sb.exec("setsid sleep 1000 >/dev/null 2>&1 &")
        assert sb.cgroup is not None
        (pid,) = others(sb) - spawner(sb)
        for group in sb.cgroup.paths():
            (group.parent / "cgroup.procs").write_text(str(pid))
        assert pid not in others(sb)
        for group in sb.cgroup.paths():
            (group / "cgroup.procs").write_text(str(pid))
        # Inside: the cgroup file system bound read-only, as the config may ask
        # for, and no way to mount one (no capability, seccomp refuses mount).
        script = (
            "for f in /sys/fs/cgroup/pids/cgroup.procs /sys/fs/cgroup/freezer/cgroup.procs "
            "/sys/fs/cgroup/unified/cgroup.procs; do echo $$ > $f && echo moved $f; done; "
            "mkdir -p /tmp/cg; for t in cgroup2 cgroup; do "
            'python3 -c "import ctypes,sys; l=ctypes.CDLL(None, use_errno=True); '
            "sys.exit(l.mount(b'x', b'/tmp/cg', sys.argv[1].encode(), 0, b'freezer') and "
            'ctypes.get_errno())" $t; echo mount=$?; done; cat /proc/self/cgroup'
        )
        result = await sb.exec(script)
        assert "moved" not in result.stdout, result
        assert result.stdout.count("mount=1\n") == 2, result  # EPERM
        assert "Read-only file system" in result.stderr
        await sb.kill_processes()
        assert only_kept(sb)
    plain = local_runtime(tmp_path / "plain")
    async with plain, await plain.create(SPEC) as sb:
        assert (await sb.exec("ls /sys/fs/cgroup")).exit_code != 0  # not there at all

"""A persistent sandbox's next task finds nothing of the last one.

Sample 1 leaves what it can wherever it can write: files in ``/tmp``,
``/var/tmp``, the home directory and its caches and the workspace, extended
attributes and a mode change on those directories, System V shared memory,
a message queue and a semaphore set (they outlive their processes), and a
daemon that keeps writing. It first sees all of it from a later command of its
own; sample 2, acquired next from the same pool (the same sandbox, in
persistent mode), sees none of it, and no process of sample 1 runs. POSIX
message queues would outlive a reset too (they cannot even be listed without
mounting their file system): a sandbox without the seccomp filter shows that,
and the filter refuses them.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from megaflow.core.errors import SandboxError
from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.config import PoolConfig
from megaflow.environment.local import LocalRuntime, LocalSandbox, workspace
from megaflow.environment.pool import SandboxPool
from tests.environment.conftest import leak_check, local, local_runtime, rootfs_tar
from tests.security.test_sandbox_kill import only_kept, others, spawner

__all__ = ["leak_check", "local", "rootfs_tar"]

SPEC = EnvironmentSpec(
    files={"task.md": "t"},
    setup=["mkdir -p /root/.cache/pip && echo base > /root/.cache/pip/base && echo base > /tmp/b"],
)
LEFT = ["/tmp/leak", "/var/tmp/leak2", "/tmp/d/e/deep", "/root/leak", "/root/.cache/x/leak",
        "/root/.cache/pip/leak", "/workspace/leak", "/workspace/.git-leak"]  # fmt: skip
SYSV = r"""
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
shm = libc.shmget(4242, 4096, 0o1600)
ctypes.memmove(libc.shmat(shm, None, 0), b"s1-shm", 6)
class Msg(ctypes.Structure):
    _fields_ = [("mtype", ctypes.c_long), ("text", ctypes.c_char * 16)]
q = libc.msgget(4243, 0o1600)
libc.msgsnd(q, ctypes.byref(Msg(1, b"s1-msg")), 16, 0)
sem = libc.semget(4244, 1, 0o1600)
print("sysv", shm >= 0, q >= 0, sem >= 0)
"""
LOOK_SYSV = "tail -n +2 /proc/sysvipc/shm /proc/sysvipc/msg /proc/sysvipc/sem | grep -c '^ '"
XATTR = (
    "import os\nfor d in ('/tmp', '/root', '/workspace'):\n"
    "    os.setxattr(d, 'user.leak', b's1')\nprint('xattr ok')"
)
LOOK_XATTR = (
    "import os\nprint(sorted(n for d in ('/tmp', '/root', '/workspace') for n in os.listxattr(d)))"
)
PLANT = (
    "mkdir -p /tmp/d/e /root/.cache/x && "
    + " && ".join(f"echo s1 > {f}" for f in LEFT)
    + f"; python3 -c {shlex.quote(SYSV)}; python3 -c {shlex.quote(XATTR)}; chmod 0700 /tmp; "
    "(echo s1 > /dev/shm/leak) 2>/dev/null && echo shm=written || echo shm=refused; "
    "setsid sh -c 'while :; do echo s1 > /tmp/late; sleep 0.05; done' >/dev/null 2>&1 &"
)


async def look(sb: LocalSandbox) -> dict[str, str]:
    """What a command of a task sees of the places sample 1 wrote to."""
    files = await sb.exec(f"ls -d {' '.join(LEFT)} /tmp/late 2>/dev/null")
    return {
        "files": files.stdout.strip(),
        "sysv": (await sb.exec(LOOK_SYSV)).stdout.strip(),
        "xattrs": (await sb.exec(["python3", "-c", LOOK_XATTR])).stdout.strip(),
        "tmp mode": (await sb.exec("stat -c %a /tmp")).stdout.strip(),
        "procs": (await sb.exec(["ps", "-eo", "args="])).stdout,
        "base": (await sb.exec("cat /root/.cache/pip/base /tmp/b task.md")).stdout,
    }


@pytest.mark.parametrize("warm", [0.0, 1.0])
@pytest.mark.parametrize("mode", ["ephemeral", "persistent"])
async def test_the_next_sample_sees_nothing_of_the_last(
    local: LocalRuntime, mode: str, warm: float
) -> None:
    cfg = PoolConfig(min=0, max=1, warm_share=warm)
    async with SandboxPool(local, mode, cfg) as pool:  # type: ignore[arg-type]
        first = await pool.acquire(SPEC, owner="sample-1")
        assert isinstance(first, LocalSandbox)
        planted = await first.exec(PLANT)
        assert "sysv True True True" in planted.stdout, planted
        assert "xattr ok" in planted.stdout
        assert "shm=refused" in planted.stdout  # /dev/shm is not writable at all
        await asyncio.sleep(0.2)
        seen = await look(first)  # sample 1's own later command sees it all
        assert sorted(seen["files"].split()) == sorted([*LEFT, "/tmp/late"]), seen
        assert seen["sysv"] == "3"
        assert seen["xattrs"] == "['user.leak', 'user.leak', 'user.leak']"
        assert seen["tmp mode"] == "700"
        assert "while :" in seen["procs"]
        await pool.release(first)

        second = await pool.acquire(SPEC, owner="sample-2")
        assert isinstance(second, LocalSandbox)
        if mode == "persistent":
            assert second.id == first.id  # the same sandbox, reset
            assert only_kept(second)  # the reset ended the spawner as well
        else:  # a new sandbox, whose setup ran: at most the spawner of its server
            assert others(second) == spawner(second)
        await asyncio.sleep(0.2)  # a survivor would write /tmp/late again by now
        seen = await look(second)
        assert seen["files"] == ""
        assert seen["sysv"] == "0"
        assert seen["xattrs"] == "[]"
        assert seen["tmp mode"] == "1777"
        assert "while :" not in seen["procs"]
        assert seen["base"] == "base\nbase\nt"  # what setup made is back
        await pool.release(second)


MQ = r"""
import ctypes, os, sys
rt = ctypes.CDLL("librt.so.1", use_errno=True)
flags = os.O_RDWR | (os.O_CREAT if sys.argv[1] == "send" else 0)
q = rt.mq_open(b"/leak", flags, 0o600, None)
if q < 0:
    sys.exit(f"mq_open: {os.strerror(ctypes.get_errno())}")
if sys.argv[1] == "send":
    rt.mq_send(q, b"s1-mq", 5, 0)
else:
    buf = ctypes.create_string_buffer(8192)
    n = rt.mq_receive(q, buf, 8192, None)
    print(buf.raw[:n].decode())
"""


async def test_posix_message_queues_are_refused(tmp_path: Path) -> None:
    cfg = PoolConfig(min=0, max=1, warm_share=0)
    unfiltered = local_runtime(tmp_path / "unfiltered", seccomp=False)
    async with unfiltered, SandboxPool(unfiltered, "persistent", cfg) as pool:
        first = await pool.acquire(SPEC)
        assert (await first.exec(["python3", "-c", MQ, "send"])).ok
        await pool.release(first)
        second = await pool.acquire(SPEC)
        assert second.id == first.id
        got = await second.exec(["python3", "-c", MQ, "receive"])
        assert got.stdout == "s1-mq\n"  # without the filter, the queue outlives the reset
        await pool.release(second)
    filtered = local_runtime(tmp_path / "filtered")
    async with filtered, await filtered.create(SPEC) as sb:
        refused = await sb.exec(["python3", "-c", MQ, "send"])
        assert refused.exit_code == 1
        assert "mq_open: Operation not permitted" in refused.stderr


def _in_sandbox_ipc(sb: LocalSandbox, uid: int, code: str) -> None:
    """Run python ``code`` on the host, in the sandbox's IPC namespace, as ``uid``."""
    assert sb.cgroup is not None
    assert sb.cgroup.kept is not None
    assert sb.proc is not None
    inside = min(sb.cgroup.kept - {sb.proc.pid})  # the sandbox's init
    subprocess.run(
        ["nsenter", f"--ipc=/proc/{inside}/ns/ipc", f"-S{uid}", f"-G{uid}",
         "/usr/bin/python3", "-c", code],
        check=True,
    )  # fmt: skip


async def test_reset_clears_ipc_in_an_image_without_python(
    tmp_path: Path, rootfs_tar: Path
) -> None:
    """The exec server removes the objects through ctypes also where the image
    has no python of its own; one it cannot remove destroys the sandbox."""
    rt = local_runtime(tmp_path)
    spec = EnvironmentSpec(image=str(rootfs_tar))
    make = "import ctypes; l = ctypes.CDLL(None); assert l.shmget(77, 4096, 0o1600) >= 0"
    async with rt, await rt.create(spec) as sb:
        assert rt.ids is not None
        _in_sandbox_ipc(sb, rt.ids.agent_uid, make)  # as if the agent had made it
        assert (await sb.exec("cat /proc/sysvipc/shm")).stdout.count("\n") == 2
        await sb.reset()
        assert (await sb.exec("cat /proc/sysvipc/shm")).stdout.count("\n") == 1
        _in_sandbox_ipc(sb, os.getuid(), make)  # host root's: the server cannot remove it
        with pytest.raises(SandboxError, match="could not be removed"):
            await sb.reset()
        assert sb.info.state == "stopped"


async def test_a_reset_whose_restore_fails_destroys_the_sandbox(
    local: LocalRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(sandbox_dir: Path) -> None:
        raise FileExistsError(17, "a name the restore must not write through", "d")

    async with await local.create(SPEC) as sb:
        monkeypatch.setattr(workspace, "restore", refused)
        with pytest.raises(SandboxError, match="restoring its files failed"):
            await sb.reset()
        assert sb.info.state == "stopped"

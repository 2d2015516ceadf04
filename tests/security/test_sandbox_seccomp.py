"""The seccomp filter: a scripted attacker calls each refused system call for
real inside a sandbox; normal work still runs. The program itself is also
checked by a small BPF interpreter, for both architectures' tables."""

from __future__ import annotations

import errno
import json
import struct
from pathlib import Path

import pytest

from megaflow.core.errors import SandboxStartError
from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.local import LocalRuntime, LocalSandbox, seccomp
from tests.environment.conftest import leak_check, local, local_runtime

__all__ = ["leak_check", "local"]

ATTACK = """
import ctypes, json, os, sys
nums = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(nr, *args):
    ctypes.set_errno(0)
    rc = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    if rc == 0 and nr == nums["clone"]:
        os._exit(0)  # a child of a clone that should not have happened
    return ("ok", rc) if rc >= 0 else ("errno", ctypes.get_errno())
out = {name: sc(nums[name], 0, 0, 0, 0, 0) for name in json.loads(sys.argv[2])}
out["clone3"] = sc(nums["clone3"], 0, 0)
out["unshare NEWUSER"] = sc(nums["unshare"], 0x10000000)
out["unshare NEWNS"] = sc(nums["unshare"], 0x00020000)
out["clone NEWUSER"] = sc(nums["clone"], 0x10000000 | 17, 0, 0, 0, 0)
ppid = os.getppid()
out["ptrace ATTACH"] = sc(nums["ptrace"], 16, ppid, 0, 0)
out["ptrace SEIZE"] = sc(nums["ptrace"], 0x4206, ppid, 0, 0)
pid = os.fork()
if pid == 0:
    os._exit(0 if libc.ptrace(0, 0, 0, 0) == 0 else 1)  # PTRACE_TRACEME is allowed
out["ptrace TRACEME"] = os.waitpid(pid, 0)[1]
for fam in (2, 10, 17, 1):
    out[f"socket {fam}"] = sc(nums["socket"], fam, 1 if fam != 17 else 3, 0)
out["x32 getpid"] = sc(39 | 0x40000000) if os.uname().machine == "x86_64" else ("errno", 1)
out["status"] = [l.split()[1] for l in open("/proc/self/status") if l.startswith("Seccomp:")]
print(json.dumps(out))
"""


async def _attack(sb: LocalSandbox) -> dict[str, list[object]]:
    nums = seccomp.ARCHES[seccomp.machine()].numbers
    argv = ["python3", "-c", ATTACK, json.dumps(nums), json.dumps(list(seccomp.DENIED))]
    result = await sb.exec(argv, timeout=30)
    assert result.exit_code == 0, result
    return json.loads(result.stdout)  # type: ignore[no-any-return]


async def test_refused_system_calls(local: LocalRuntime) -> None:
    async with await local.create(EnvironmentSpec(network="none")) as sb:
        got = await _attack(sb)
    eperm, enosys = ["errno", errno.EPERM], ["errno", errno.ENOSYS]
    for name in seccomp.DENIED:
        assert got[name] == eperm, name
    assert got["clone3"] == enosys
    for name in ("unshare NEWUSER", "clone NEWUSER", "ptrace ATTACH", "ptrace SEIZE"):
        assert got[name] == eperm, name
    assert got["unshare NEWNS"] == eperm  # no CAP_SYS_ADMIN: refused by the kernel
    assert got["ptrace TRACEME"] == 0
    for fam in (2, 10, 17):
        assert got[f"socket {fam}"] == eperm, fam
    assert got["socket 1"][0] == "ok"  # unix sockets work
    assert got["x32 getpid"] == eperm
    assert got["status"] == ["2"]  # SECCOMP_MODE_FILTER


async def test_inet_sockets_allowed_with_loopback(local: LocalRuntime) -> None:
    async with await local.create(EnvironmentSpec(network="loopback")) as sb:
        got = await _attack(sb)
    assert got["socket 2"][0] == "ok"
    assert got["socket 10"][0] == "ok"
    assert got["unshare NEWUSER"] == ["errno", errno.EPERM]


async def test_the_filter_is_what_refuses_user_namespaces(tmp_path: Path) -> None:
    """Without it (``seccomp: false``) the kernel would allow a nested user namespace."""
    async with local_runtime(tmp_path) as rt, await rt.create(EnvironmentSpec()) as sb:
        refused = await sb.exec("unshare -U true")
        assert refused.exit_code != 0
        assert "not permitted" in refused.stderr
    async with (
        local_runtime(tmp_path, seccomp=False) as rt,
        await rt.create(EnvironmentSpec()) as sb,
    ):
        assert (await sb.exec("unshare -U true")).exit_code == 0


async def test_normal_work_still_runs(local: LocalRuntime) -> None:
    spec = EnvironmentSpec(
        files={"test_ok.py": "import threading\ndef test_ok():\n    assert 1 + 1 == 2\n"}
    )
    async with await local.create(spec) as sb:
        work = (
            "python3 -c 'import threading,subprocess,concurrent.futures as f\n"
            't=threading.Thread(target=print,args=("thread",));t.start();t.join()\n'
            'print(subprocess.run(["echo","sub"],capture_output=True,text=True).stdout.strip())\n'
            "print(sum(f.ThreadPoolExecutor(4).map(abs,[1,2,3])))'\n"
            "git init -q r && cd r && echo x > f && git add f && "
            "git -c user.email=a@b -c user.name=a commit -qm m && git log --oneline | wc -l\n"
            "cd .. && python3 -m pytest -q -p no:cacheprovider test_ok.py | tail -1"
        )
        result = await sb.exec(work, timeout=120)
        assert result.exit_code == 0, result
        lines = result.stdout.splitlines()
        assert lines[:4] == ["thread", "sub", "6", "1"]
        assert "1 passed" in lines[-1]


def run_bpf(prog: bytes, nr: int, arch: int, args: tuple[int, ...] = ()) -> int:
    """Evaluate a classic seccomp BPF program on one system call."""
    data = struct.pack("<IIQ6Q", nr, arch, 0, *(list(args) + [0] * (6 - len(args))))
    insns = [struct.unpack_from("=HBBI", prog, i) for i in range(0, len(prog), 8)]
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        pc += 1
        if code == 0x20:
            acc = struct.unpack_from("<I", data, k)[0]
        elif code == 0x06:
            return k
        elif code in (0x15, 0x35, 0x45):
            hit = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += jt if hit else jf
        else:
            raise AssertionError(f"unexpected BPF opcode {code:#x}")


@pytest.mark.parametrize("name", list(seccomp.ARCHES))
def test_filter_program_for_each_arch(name: str) -> None:
    arch = seccomp.ARCHES[name]
    nr = arch.numbers
    prog = seccomp.build("none", name)
    eperm, allow = seccomp.ERRNO | errno.EPERM, seccomp.ALLOW
    for call in seccomp.DENIED:
        assert run_bpf(prog, nr[call], arch.audit) == eperm, call
    assert run_bpf(prog, nr["clone3"], arch.audit) == seccomp.ERRNO | errno.ENOSYS
    assert run_bpf(prog, nr["clone"], arch.audit, (0x10000000 | 17,)) == eperm
    assert run_bpf(prog, nr["clone"], arch.audit, (0x3D0F00,)) == allow  # pthread_create
    assert run_bpf(prog, nr["ptrace"], arch.audit, (0,)) == allow
    assert run_bpf(prog, nr["ptrace"], arch.audit, (16,)) == eperm
    assert run_bpf(prog, nr["socket"], arch.audit, (10,)) == eperm
    assert run_bpf(prog, nr["socket"], arch.audit, (1,)) == allow
    assert run_bpf(seccomp.build("loopback", name), nr["socket"], arch.audit, (2,)) == allow
    assert run_bpf(prog, 0, arch.audit) == allow  # read / io_setup
    assert run_bpf(prog, 0, 0x40000003) == eperm  # i386 (int 0x80): another arch
    if arch.x32:
        assert run_bpf(prog, 39 | seccomp.X32_BIT, arch.audit) == eperm


def test_unknown_arch_is_refused_unless_disabled() -> None:
    with pytest.raises(SandboxStartError, match="seccomp: false"):
        seccomp.build("none", "riscv64")

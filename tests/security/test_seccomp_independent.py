"""The seccomp deny list against the design, written out here by hand.

The other seccomp tests take the list of refused calls and their numbers from
the filter's own module, so a call dropped from it drops out of the tests too.
Here the calls docs/environment.md says are refused, and their numbers, are
written down independently: the filter program must refuse each, and inside a
real sandbox each must come back with the filter's errno. Where the kernel
itself would answer otherwise (the arguments are chosen so that it would),
a sandbox without the filter shows that answer, so the errno seen with the
filter is the filter's.
"""

from __future__ import annotations

import errno
import json
import platform
from pathlib import Path

import pytest

from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.local import LocalRuntime, LocalSandbox, seccomp
from tests.environment.conftest import leak_check, local, local_runtime
from tests.security.test_sandbox_seccomp import run_bpf

__all__ = ["leak_check", "local"]

# name: ((x86_64 number, aarch64 number), arguments of the call made in a sandbox)
DESIGN_DENIED: dict[str, tuple[tuple[int, int], tuple[int, ...]]] = {
    "mount": ((165, 40), (0, 0, 0, 0, 0)),  # kernel: EFAULT (no target path)
    "umount2": ((166, 39), (0, 0xFFFF)),  # kernel: EINVAL (unknown flags)
    "pivot_root": ((155, 41), (0, 0)),
    "move_mount": ((429, 429), (-1, 0, -1, 0, 0)),
    "open_tree": ((428, 428), (-1, 0, 0xFFFFFFFF)),  # kernel: EINVAL (unknown flags)
    "fsopen": ((430, 430), (0, 0)),
    "fsconfig": ((431, 431), (-1, 0, 0, 0, 0)),  # kernel: EINVAL (no fd)
    "fsmount": ((432, 432), (-1, 0, 0)),
    "fspick": ((433, 433), (-1, 0, 0)),
    "mount_setattr": ((442, 442), (-1, 0, 0xFFFFFFFF, 0, 0)),  # kernel: EINVAL (unknown flags)
    "keyctl": ((250, 219), (9999, 0, 0, 0, 0)),  # kernel: EOPNOTSUPP (no such command)
    "add_key": ((248, 217), (0, 0, 0, 0, 0)),  # kernel: EFAULT (no key type)
    "request_key": ((249, 218), (0, 0, 0, 0)),  # kernel: EFAULT (no key type)
    "bpf": ((321, 280), (9999, 0, 0)),
    "setns": ((308, 268), (-1, 0)),  # kernel: EBADF
    "kexec_load": ((246, 104), (0, 0, 0, 0)),
    "kexec_file_load": ((320, 294), (-1, -1, 0, 0, 0)),
    "init_module": ((175, 105), (0, 0, 0)),
    "finit_module": ((313, 273), (-1, 0, 0)),
    "delete_module": ((176, 106), (0, 0)),
    "swapon": ((167, 224), (0, 0)),
    "swapoff": ((168, 225), (0,)),
    "reboot": ((169, 142), (0, 0, 0, 0)),
    "userfaultfd": ((323, 282), (0x3,)),  # kernel: EINVAL (user-mode only, then a bad flag)
    "perf_event_open": ((298, 241), (0, 0, -1, -1, 0)),  # kernel: EFAULT or EACCES
    "io_uring_setup": ((425, 425), (1, 0)),  # kernel: EFAULT (no params)
    "io_uring_enter": ((426, 426), (-1, 0, 0, 0, 0, 0)),  # kernel: EBADF
    "io_uring_register": ((427, 427), (-1, 0, 0, 0)),  # kernel: EBADF or EINVAL (no ring)
}
# Calls for which the kernel, with the arguments above, answers something else
# than EPERM in a sandbox (argument checks come before any permission check);
# the rest check a capability first, and for them only the program check below
# can tell the filter's EPERM from the kernel's.
KERNEL_SAYS_OTHERWISE = {
    "mount", "umount2", "open_tree", "fsconfig", "mount_setattr", "keyctl", "add_key",
    "request_key", "setns", "userfaultfd", "perf_event_open", "io_uring_setup",
    "io_uring_enter", "io_uring_register",
}  # fmt: skip
CLONE3 = (435, 435)  # refused with ENOSYS, so that libc falls back to clone
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
COLUMN = {"x86_64": 0, "aarch64": 1}
RET_ERRNO = 0x00050000  # SECCOMP_RET_ERRNO; the errno is in the low 16 bits
RET_ALLOW = 0x7FFF0000

CALLS = """
import ctypes, json, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
out = {}
for name, (nr, args) in json.loads(sys.argv[1]).items():
    ctypes.set_errno(0)
    rc = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    out[name] = "ok" if rc >= 0 else ctypes.get_errno()
print(json.dumps(out))
"""


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
@pytest.mark.parametrize("network", ["none", "loopback", "host"])
def test_the_filter_program_refuses_every_call_the_design_denies(arch: str, network: str) -> None:
    prog = seccomp.build(network, arch)
    audit, col = AUDIT_ARCH[arch], COLUMN[arch]
    refused = {name: run_bpf(prog, nums[col], audit) for name, (nums, _) in DESIGN_DENIED.items()}
    assert refused == dict.fromkeys(DESIGN_DENIED, RET_ERRNO | errno.EPERM)
    assert run_bpf(prog, CLONE3[col], audit) == RET_ERRNO | errno.ENOSYS
    ptrace, unshare, clone = {"x86_64": (101, 272, 56), "aarch64": (117, 97, 220)}[arch]
    assert run_bpf(prog, ptrace, audit, (16,)) == RET_ERRNO | errno.EPERM  # PTRACE_ATTACH
    assert run_bpf(prog, ptrace, audit, (0x4206,)) == RET_ERRNO | errno.EPERM  # PTRACE_SEIZE
    assert run_bpf(prog, ptrace, audit, (0,)) == RET_ALLOW  # PTRACE_TRACEME
    assert run_bpf(prog, unshare, audit, (0x10000000,)) == RET_ERRNO | errno.EPERM
    assert run_bpf(prog, clone, audit, (0x10000000 | 17,)) == RET_ERRNO | errno.EPERM
    assert run_bpf(prog, clone, audit, (0x3D0F00,)) == RET_ALLOW  # pthread_create's flags
    assert run_bpf(prog, 39 if arch == "x86_64" else 172, audit) == RET_ALLOW  # getpid


def _machine() -> str:
    machine = platform.machine()
    if machine not in COLUMN:
        pytest.skip(f"no system call numbers written down for {machine}")
    return machine


async def _call_all(sb: LocalSandbox, machine: str) -> dict[str, object]:
    col = COLUMN[machine]
    calls = {name: (nums[col], args) for name, (nums, args) in DESIGN_DENIED.items()}
    calls["clone3"] = (CLONE3[col], (0, 0))
    result = await sb.exec(["python3", "-c", CALLS, json.dumps(calls)], timeout=30)
    assert result.exit_code == 0, result
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def _io_uring_disabled() -> bool:
    """The host's kernel refuses io_uring itself (kernel.io_uring_disabled, 6.6+)."""
    path = Path("/proc/sys/kernel/io_uring_disabled")
    return path.exists() and path.read_text().strip() != "0"


async def test_each_denied_call_gets_the_filters_errno_in_a_sandbox(
    local: LocalRuntime, tmp_path: Path
) -> None:
    machine = _machine()
    async with await local.create(EnvironmentSpec(network="none")) as sb:
        got = await _call_all(sb, machine)
    want = dict.fromkeys(DESIGN_DENIED, errno.EPERM)
    want["clone3"] = errno.ENOSYS
    assert got == want

    # Without the filter the kernel answers these calls itself, and not with EPERM.
    async with (
        local_runtime(tmp_path / "unfiltered", seccomp=False) as rt,
        await rt.create(EnvironmentSpec(network="none")) as sb,
    ):
        kernel = await _call_all(sb, machine)
    shown = KERNEL_SAYS_OTHERWISE - ({"io_uring_setup"} if _io_uring_disabled() else set())
    assert {name: kernel[name] for name in shown if kernel[name] == errno.EPERM} == {}
    assert kernel["clone3"] == errno.EINVAL  # an empty struct clone_args

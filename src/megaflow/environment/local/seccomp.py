"""The seccomp filter every local sandbox runs under, as raw classic BPF.

bubblewrap loads it (``--seccomp FD``) right before it starts the exec
server, so it covers every process in the sandbox. It is a deny list on top
of the namespaces and the dropped capabilities: the system calls below fail
with EPERM (``clone3`` with ENOSYS, so that libc falls back to ``clone``,
whose flags a classic filter can see). Calls of another architecture than
the host's (i386 through ``int 0x80``, x32 on x86_64) are refused as a whole.
"""

from __future__ import annotations

import errno
import platform
import struct

from megaflow.core.errors import SandboxStartError

# struct seccomp_data: nr (u32), arch (u32), instruction_pointer (u64), args[6] (u64)
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets; args are read by their low 32 bits (little endian)
_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ, _JGE, _JSET = 0x15, 0x35, 0x45  # BPF_JMP | BPF_{JEQ,JGE,JSET} | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
ALLOW = 0x7FFF0000
ERRNO = 0x00050000
X32_BIT = 0x40000000
CLONE_NEWUSER = 0x10000000
PTRACE_ATTACH, PTRACE_SEIZE = 16, 0x4206
AF_INET, AF_INET6, AF_PACKET = 2, 10, 17

# Refused outright: mounts, keyrings, bpf, namespaces by fd, kernel modules and
# images, swap, reboot, userfaultfd, perf, io_uring (it can open sockets and
# files without the system calls this filter sees), and POSIX message queues
# (they outlive their processes in the sandbox's IPC namespace and cannot be
# listed without mounting their file system, so a reset could not clear them).
DENIED = (
    "mount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsconfig",
    "fsmount", "fspick", "mount_setattr", "keyctl", "add_key", "request_key", "bpf",
    "setns", "kexec_load", "kexec_file_load", "init_module", "finit_module",
    "delete_module", "swapon", "swapoff", "reboot", "userfaultfd", "perf_event_open",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "mq_open",
)  # fmt: skip


class Arch:
    def __init__(self, audit: int, numbers: dict[str, int], x32: bool) -> None:
        self.audit, self.numbers, self.x32 = audit, numbers, x32


_COMMON = {  # numbers shared by both tables (the newer, unified ones)
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
    "fspick": 433, "clone3": 435, "mount_setattr": 442,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
}  # fmt: skip
ARCHES = {
    "x86_64": Arch(0xC000003E, {
        **_COMMON, "socket": 41, "clone": 56, "ptrace": 101, "pivot_root": 155, "mount": 165,
        "umount2": 166, "swapon": 167, "swapoff": 168, "reboot": 169, "init_module": 175,
        "delete_module": 176, "kexec_load": 246, "add_key": 248, "request_key": 249,
        "keyctl": 250, "unshare": 272, "perf_event_open": 298, "setns": 308,
        "finit_module": 313, "kexec_file_load": 320, "bpf": 321, "userfaultfd": 323,
        "mq_open": 240,
    }, x32=True),
    "aarch64": Arch(0xC00000B7, {
        **_COMMON, "umount2": 39, "mount": 40, "pivot_root": 41, "unshare": 97,
        "kexec_load": 104, "init_module": 105, "delete_module": 106, "ptrace": 117,
        "reboot": 142, "socket": 198, "add_key": 217, "request_key": 218, "keyctl": 219,
        "clone": 220, "swapon": 224, "swapoff": 225, "perf_event_open": 241, "setns": 268,
        "finit_module": 273, "bpf": 280, "userfaultfd": 282, "kexec_file_load": 294,
        "mq_open": 180,
    }, x32=False),
}  # fmt: skip


class _Asm:
    """A tiny assembler: jumps name labels, resolved to forward offsets."""

    def __init__(self) -> None:
        self.code: list[tuple[int, str | int, str | int, int]] = []
        self.labels: dict[str, int] = {}

    def op(self, code: int, k: int, jt: str | int = 0, jf: str | int = 0) -> None:
        self.code.append((code, jt, jf, k))

    def label(self, name: str) -> None:
        self.labels[name] = len(self.code)

    def assemble(self) -> bytes:
        out = bytearray()
        for i, (code, jt, jf, k) in enumerate(self.code):

            def off(target: str | int, i: int = i) -> int:
                if isinstance(target, int):
                    return target
                delta = self.labels[target] - i - 1
                if not 0 <= delta <= 255:
                    raise ValueError(f"seccomp jump to {target} out of range")
                return delta

            out += struct.pack("=HBBI", code, off(jt), off(jf), k)
        return bytes(out)


def machine() -> str:
    return platform.machine()


def build(network: str, arch_name: str | None = None) -> bytes:
    """The filter program (struct sock_filter[]) for a sandbox with ``network``."""
    name = arch_name or machine()
    arch = ARCHES.get(name)
    if arch is None:
        raise SandboxStartError(
            f"no seccomp table for machine {name!r} (known: {', '.join(ARCHES)}); "
            "set the local runtime's 'seccomp: false' to run without the filter"
        )
    nr = arch.numbers
    a = _Asm()
    a.op(_LD_ABS, _ARCH)
    a.op(_JEQ, arch.audit, 0, "eperm")
    a.op(_LD_ABS, _NR)
    if arch.x32:
        a.op(_JGE, X32_BIT, "eperm", 0)
    for call in DENIED:
        a.op(_JEQ, nr[call], "eperm", 0)
    a.op(_JEQ, nr["clone3"], "enosys", 0)
    a.op(_JEQ, nr["ptrace"], "ptrace", 0)
    a.op(_JEQ, nr["clone"], "newuser", 0)
    a.op(_JEQ, nr["unshare"], "newuser", 0)
    if network == "none":
        a.op(_JEQ, nr["socket"], "socket", 0)
    a.op(_RET, ALLOW)
    a.label("ptrace")
    a.op(_LD_ABS, _ARG0)
    a.op(_JEQ, PTRACE_ATTACH, "eperm", 0)
    a.op(_JEQ, PTRACE_SEIZE, "eperm", 0)
    a.op(_RET, ALLOW)
    a.label("newuser")
    a.op(_LD_ABS, _ARG0)
    a.op(_JSET, CLONE_NEWUSER, "eperm", 0)
    a.op(_RET, ALLOW)
    if network == "none":
        a.label("socket")
        a.op(_LD_ABS, _ARG0)
        for family in (AF_INET, AF_INET6, AF_PACKET):
            a.op(_JEQ, family, "eperm", 0)
        a.op(_RET, ALLOW)
    a.label("enosys")
    a.op(_RET, ERRNO | errno.ENOSYS)
    a.label("eperm")
    a.op(_RET, ERRNO | errno.EPERM)
    return a.assemble()

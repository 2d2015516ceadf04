"""The local sandboxes' seccomp policy, as a container engine's seccomp profile.

The local runtime loads a classic BPF filter
(:mod:`megaflow.environment.local.seccomp`); an engine (Docker, Podman) takes
a JSON profile instead (``--security-opt seccomp=...``) and compiles it with
libseccomp. This module writes the same policy in that form, from the same
tables: the calls in ``DENIED`` fail with EPERM (mounts, namespaces by fd,
keyrings, bpf, io_uring, ...), ``clone3`` with ENOSYS (libc falls back to
``clone``, whose flags the filter can see), ``clone``/``unshare`` with
``CLONE_NEWUSER`` with EPERM (no new user namespace, so no ``unshare -Urm``
and no mount inside one), ``ptrace`` attach and seize with EPERM, and with
no network ``socket`` of the IP and packet families. Only the host's own
architecture is listed, so calls of another (i386 through ``int 0x80``, x32)
are refused as a whole.

A profile replaces the engine's default one; the container keeps the
engine's dropped capabilities, so what the default profile refuses for want
of a capability stays refused.
"""

from __future__ import annotations

import errno
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from megaflow.core.errors import SandboxStartError
from megaflow.environment.local.seccomp import (
    AF_INET,
    AF_INET6,
    AF_PACKET,
    CLONE_NEWUSER,
    DENIED,
    PTRACE_ATTACH,
    PTRACE_SEIZE,
    machine,
)

_ARCHES = {"x86_64": "SCMP_ARCH_X86_64", "aarch64": "SCMP_ARCH_AARCH64"}


def _refuse(
    names: list[str], code: int, args: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    rule: dict[str, Any] = {"names": names, "action": "SCMP_ACT_ERRNO", "errnoRet": code}
    if args:
        rule["args"] = args
    return rule


def _arg0(value: int, op: str = "SCMP_CMP_EQ", mask: int = 0) -> list[dict[str, Any]]:
    return [{"index": 0, "value": mask or value, "valueTwo": value if mask else 0, "op": op}]


def profile(network: str, arch_name: str | None = None) -> dict[str, Any]:
    """The profile for a sandbox with ``network`` (``none`` or ``host``)."""
    name = arch_name or machine()
    arch = _ARCHES.get(name)
    if arch is None:
        raise SandboxStartError(
            f"no seccomp profile for machine {name!r} (known: {', '.join(_ARCHES)})"
        )
    newuser = _arg0(CLONE_NEWUSER, "SCMP_CMP_MASKED_EQ", CLONE_NEWUSER)
    rules = [
        _refuse(list(DENIED), errno.EPERM),
        _refuse(["clone3"], errno.ENOSYS),
        _refuse(["clone", "unshare"], errno.EPERM, newuser),
        _refuse(["ptrace"], errno.EPERM, _arg0(PTRACE_ATTACH)),
        _refuse(["ptrace"], errno.EPERM, _arg0(PTRACE_SEIZE)),
    ]
    if network == "none":
        rules += [
            _refuse(["socket"], errno.EPERM, _arg0(f)) for f in (AF_INET, AF_INET6, AF_PACKET)
        ]
    return {"defaultAction": "SCMP_ACT_ALLOW", "architectures": [arch], "syscalls": rules}


class Profiles:
    """The ``security_opt`` entries that load :func:`profile` into an engine.

    Docker takes the profile's JSON inline. Podman's Docker-compatible API
    (4.x) takes only a path, which it reads when the container is made: the
    profile is written to a private folder of this process (0700), so Podman
    must run on this host (its usual unix socket). ``close()`` removes it."""

    def __init__(self) -> None:
        self._folder: Path | None = None
        self._paths: dict[str, str] = {}

    def security_opt(self, network: str, *, podman: bool) -> str:
        text = json.dumps(profile(network), separators=(",", ":"))
        if not podman:
            return "seccomp=" + text
        if network not in self._paths:
            if self._folder is None:
                self._folder = Path(tempfile.mkdtemp(prefix="megaflow-seccomp-"))
            path = self._folder / f"{network}.json"
            path.write_text(text)
            self._paths[network] = str(path)
        return "seccomp=" + self._paths[network]

    def close(self) -> None:
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None
            self._paths.clear()

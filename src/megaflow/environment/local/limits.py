"""What a sandbox spec may ask of this machine, checked before anything starts.

A spec asking for more CPUs or memory than the machine has, too little
memory for the exec server, a workdir that is not a path of its own, or a
sized disk without root is refused with ``InvalidInput`` naming the field,
so it fails at once instead of as a sandbox that never starts.
"""

from __future__ import annotations

import os

from megaflow.core.errors import InvalidInput
from megaflow.environment.abstract import EnvironmentSpec

MIN_MEMORY_MB = 32  # the exec server alone needs about 10 MiB


def mem_total() -> int:
    """The machine's memory in bytes (``MemTotal``), 0 if unknown."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return 0


def check_spec(spec: EnvironmentSpec, memory_bytes: int) -> None:
    """Refuse what no local sandbox on a machine of ``memory_bytes`` can give."""
    res = spec.resources
    cpus = os.cpu_count() or 1
    if res.cpus > cpus:
        raise InvalidInput(f"spec asks for {res.cpus} cpus but this machine has {cpus}")
    if res.memory_mb < MIN_MEMORY_MB or res.memory_mb * 1024 * 1024 > memory_bytes:
        raise InvalidInput(
            f"spec memory_mb={res.memory_mb} is impossible here: give between "
            f"{MIN_MEMORY_MB} and {memory_bytes // 2**20} MiB"
        )
    if not spec.workdir.startswith("/") or spec.workdir in ("/", "/proc", "/dev", "/tmp"):
        raise InvalidInput(f"spec workdir {spec.workdir!r} must be an absolute path of its own")
    if res.disk_mb is not None and os.geteuid() != 0:
        raise InvalidInput(
            "disk_mb needs MegaFlow to run as root here (each sandbox's writable "
            "state is a tmpfs of that size, mounted by this process)"
        )

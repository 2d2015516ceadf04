"""What a sandbox's container carries, and how it is read back.

Every container is made with labels naming its sandbox id, owner, creation
time, deadline and image, and the host, pid and instance of the runtime
that made it (:func:`container_args`). ``list`` rebuilds a sandbox's record
from them (:func:`from_labels`) and ``reap_orphans`` decides from them alone
which containers no live runtime will ever destroy (:func:`is_orphan`), so
both work from the engine's state, also after a crash.
"""

from __future__ import annotations

import os
from typing import Any

from megaflow.environment.abstract import EnvironmentSpec, SandboxInfo
from megaflow.environment.config import ContainerRuntimeConfig
from megaflow.environment.container.scripts import KEEPER_SCRIPT, STATE_DIR


def populates(spec: EnvironmentSpec) -> bool:
    """Whether creating the sandbox changes its workspace after the start."""
    return bool(spec.repo or spec.files or spec.setup)


def container_args(
    config: ContainerRuntimeConfig,
    spec: EnvironmentSpec,
    info: SandboxInfo,
    ref: str,
    *,
    host: str,
    instance: str,
    seccomp: str,
) -> dict[str, Any]:
    """The engine's ``containers.create`` arguments for one sandbox on image ``ref``;
    ``seccomp`` is the ``security_opt`` entry of the sandboxes' seccomp profile
    (:mod:`megaflow.environment.container.seccomp`)."""
    res = spec.resources
    labels = {
        "megaflow.namespace": config.namespace,
        "megaflow.sandbox": info.id,
        "megaflow.owner": info.owner or "",
        "megaflow.created": repr(info.created_at),
        "megaflow.deadline": repr(info.deadline),
        "megaflow.image": spec.image,
        "megaflow.host": host,
        "megaflow.pid": str(os.getpid()),
        "megaflow.instance": instance,
    }
    mem = f"{res.memory_mb}m"
    args: dict[str, Any] = {
        "image": ref,
        "command": ["/bin/sh", "-c", KEEPER_SCRIPT, spec.workdir]
        + ([] if populates(spec) else ["snapshot"]),
        "name": info.id,
        "hostname": "sandbox",
        "labels": labels,
        "environment": dict(spec.env),
        "working_dir": spec.workdir,
        "network_mode": "host" if spec.network == "host" else "none",
        "nano_cpus": int(res.cpus * 1e9),
        "mem_limit": mem,
        "memswap_limit": mem,
        "pids_limit": res.pids,
        "init": config.init,
        "detach": True,
        "security_opt": [seccomp],  # the local sandboxes' seccomp policy
    }
    if res.disk_mb is not None:
        args.update(disk_args(spec.workdir, res.disk_mb))
    return args


# Where a process may write in a sandbox with ``disk_mb``: everything else is the
# image's read-only root. (path, mode); the engine's own /dev stays as it made it.
WRITABLE = (("/tmp", "1777"), ("/var/tmp", "1777"), ("/root", "0700"), ("/home", "0755"),
            ("/run", "0755"), (STATE_DIR, "0700"))  # fmt: skip


def disk_args(workdir: str, disk_mb: int) -> dict[str, Any]:
    """``disk_mb`` on every writable path: a read-only root, and a tmpfs of that size
    on the workspace, /tmp, /var/tmp, /root, /home, /run, the reset snapshot's
    folder and /dev/shm. Sized tmpfs mounts work on every engine and storage driver
    (the root's own size, ``--storage-opt size``, needs overlay on XFS with project
    quotas); their pages are charged to the container's memory limit."""
    size = f"size={disk_mb}m"
    tmpfs = {path: f"{size},mode={mode}" for path, mode in WRITABLE}
    tmpfs[workdir] = f"{size},mode=0755"
    return {"read_only": True, "tmpfs": tmpfs, "shm_size": f"{disk_mb}m"}


def from_labels(c: dict[str, Any]) -> SandboxInfo:
    """A sandbox's record, rebuilt from its container's labels and state."""
    labels = c.get("Labels") or {}
    state = c.get("State")
    return SandboxInfo(
        id=labels.get("megaflow.sandbox") or c["Id"][:12],
        runtime="container",
        state="ready" if state == "running" else "starting" if state == "created" else "stopped",
        owner=labels.get("megaflow.owner") or None,
        created_at=float(labels.get("megaflow.created") or 0),
        deadline=float(labels.get("megaflow.deadline") or 0),
        image=labels.get("megaflow.image") or c.get("Image", ""),
    )


def is_orphan(
    c: dict[str, Any], now: float, *, start_timeout_s: float, host: str, instance: str
) -> bool:
    """Past its deadline, stopped (or never started), or made on this host by
    another runtime instance whose process no longer runs (a crash)."""
    labels = c.get("Labels") or {}
    if float(labels.get("megaflow.deadline") or "inf") <= now:
        return True
    age = now - float(labels.get("megaflow.created") or now)
    if c.get("State") != "running" and age > start_timeout_s + 30:
        return True  # its main process died, or it never started
    if labels.get("megaflow.instance") == instance:
        return False
    if labels.get("megaflow.host") != host:
        return False  # another machine's process: only its deadline tells
    return not _pid_alive(int(labels.get("megaflow.pid") or 0))


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return True  # no pid recorded: leave it to the deadline
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

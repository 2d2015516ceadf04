"""What a sandbox pod is allowed: its seccomp profile, capabilities, and where it may write.

The same limits as the local and container runtimes, in the form a cluster
enforces them:

- **seccomp**: a ``Localhost`` profile (``securityContext.seccompProfile``),
  the container runtime's policy (:mod:`megaflow.environment.container.
  seccomp`: no new user namespace, no mount, no inet sockets with network
  ``none``, ...), which the kubelet reads from a file on the node
  (:mod:`~megaflow.environment.kubernetes.profiles`). A pod naming a profile
  its node lacks does not start (``CreateContainerError``).
- **capabilities**: all dropped for a non-root uid; a root sandbox gets back
  only :data:`ROOT_CAPABILITIES`, Podman's default set (Docker's less
  ``NET_RAW``, ``MKNOD`` and ``AUDIT_WRITE``), whatever the node's container
  runtime would grant; no privilege escalation either way.
- **disk_mb**: a read-only root and a memory-backed ``emptyDir`` with
  ``sizeLimit: <disk_mb>Mi`` (a tmpfs of that size, as the container runtime
  mounts) on the workspace and on every other writable path
  (:data:`WRITABLE`), so writing more fails with ENOSPC in the sandbox. A
  memory-backed volume's pages count against the container's memory limit.
  With ``workspace: image`` the image's own workdir must stay writable, so
  the root does too; there ``disk_mb`` is the ``ephemeral-storage`` limit
  alone, which the kubelet enforces by evicting the pod.
"""

from __future__ import annotations

import re

from kubernetes import client as k8s

from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.config import KubernetesRuntimeConfig
from megaflow.environment.container.labels import WRITABLE as CONTAINER_WRITABLE
from megaflow.environment.container.scripts import RUN_DIR, STATE_DIR
from megaflow.environment.kubernetes.profiles import profile_path

ROOT_CAPABILITIES = (
    "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "NET_BIND_SERVICE", "SETFCAP",
    "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
)  # fmt: skip
# Every path a process may write with disk_mb, besides the workspace: the container
# runtime's tmpfs paths and /dev/shm (the container runtime sizes it with shm_size).
WRITABLE = (*(path for path, _ in CONTAINER_WRITABLE), RUN_DIR)
WORKSPACE, STATE = "workspace", "state"  # volume names the runtime's tests know


def seccomp_profile(config: KubernetesRuntimeConfig, network: str) -> k8s.V1SeccompProfile:
    path = profile_path(config, network)
    if path is None:
        return k8s.V1SeccompProfile(type="RuntimeDefault")
    return k8s.V1SeccompProfile(type="Localhost", localhost_profile=path)


def read_only_root(config: KubernetesRuntimeConfig, spec: EnvironmentSpec) -> bool:
    """Whether the pod's root is read-only: with ``disk_mb``, unless the workdir is
    the image's own (``workspace: image``)."""
    return spec.resources.disk_mb is not None and config.workspace == "volume"


def container_security(
    config: KubernetesRuntimeConfig, spec: EnvironmentSpec
) -> k8s.V1SecurityContext:
    """The sandbox container's security context."""
    non_root = config.run_as_user is not None
    return k8s.V1SecurityContext(
        allow_privilege_escalation=False,
        privileged=False,
        capabilities=k8s.V1Capabilities(
            drop=["ALL"], add=None if non_root else list(ROOT_CAPABILITIES)
        ),
        run_as_non_root=True if non_root else None,
        read_only_root_filesystem=True if read_only_root(config, spec) else None,
        seccomp_profile=seccomp_profile(config, spec.network),
    )


def _name(path: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-")


def writable_volumes(
    config: KubernetesRuntimeConfig, spec: EnvironmentSpec
) -> tuple[list[k8s.V1Volume], list[k8s.V1VolumeMount]]:
    """The pod's volumes and the container's mounts of them: the workspace (unless
    ``workspace: image``) and the snapshot folder as node-disk ``emptyDir``\\ s; with
    a read-only root, a memory-backed one of ``disk_mb`` on every writable path."""
    paths = {STATE_DIR: STATE}
    if config.workspace == "volume":
        paths[spec.workdir] = WORKSPACE
    disk_mb = spec.resources.disk_mb
    bounded = read_only_root(config, spec)
    if bounded:
        for path in WRITABLE:
            paths.setdefault(path, _name(path))
    volumes, mounts = [], []
    for path, name in sorted(paths.items(), key=lambda p: p[1]):
        source = (
            k8s.V1EmptyDirVolumeSource(medium="Memory", size_limit=f"{disk_mb}Mi")
            if bounded
            else k8s.V1EmptyDirVolumeSource()
        )
        volumes.append(k8s.V1Volume(name=name, empty_dir=source))
        mounts.append(k8s.V1VolumeMount(name=name, mount_path=path))
    return volumes, mounts

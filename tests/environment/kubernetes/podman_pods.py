"""A pod spec run the way a kubelet runs it, with Podman: the node half of the stand-in.

:func:`plan` turns a pod's wire form into a ``podman pod create`` and a
``podman run`` of its one container, honouring each field as a kubelet and
its container runtime do:

- ``seccompProfile`` ``Localhost`` -> ``--security-opt seccomp=<file>``, the
  file being ``localhostProfile`` under this node's seccomp root (a missing
  file leaves the container waiting in ``CreateContainerError``, as on a
  node); ``RuntimeDefault`` -> Podman's own profile; ``Unconfined``;
- ``capabilities`` -> ``--cap-drop`` / ``--cap-add``;
  ``allowPrivilegeEscalation: false`` -> ``no-new-privileges``;
- ``readOnlyRootFilesystem`` -> ``--read-only`` with none of Podman's own
  tmpfs mounts (a kubelet adds none);
- ``emptyDir`` -> a fresh directory of the node, bound in, as the kubelet
  makes it: with ``medium: Memory`` a tmpfs of ``sizeLimit`` mounted on it
  (mode 1777), else a plain directory (mode 0777); with ``fsGroup`` owned by
  that group, setgid. (Podman's own tmpfs mounts would take the mode of the
  image's directory they cover, which an emptyDir does not.)
- ``runAsUser``/``runAsGroup``/``fsGroup`` -> ``--user``/``--group-add``,
  ``runAsNonRoot`` checked (``CreateContainerConfigError`` for root);
- ``shareProcessNamespace`` -> the pod shares its pid namespace (the infra
  container is PID 1); ``hostname``; cpu and memory limits (no swap).

A field this stand-in does not know, or a value it does not implement, is
refused at create with the field's path (:class:`Refused`, an HTTP 422 as
an API server refuses an invalid pod) instead of being dropped. Accepted and
not acted on: labels, annotations, owner references and the namespace (the
API server's), requests (the scheduler's), the service account name (no
token is mounted: ``automountServiceAccountToken`` must be false), service
links (there are no services). The container's ``ephemeral-storage`` limit is
kept in the plan (``ephemeral``): the stand-in evicts a pod over it as a
kubelet does (:mod:`podman_eviction`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes.utils import parse_quantity

Schema = dict[str, Any]
_SECCOMP: Schema = {"type": None, "localhostProfile": None}
_CONTAINER: Schema = {
    "name": None, "image": None, "imagePullPolicy": None, "command": None, "args": None,
    "workingDir": None, "env": [{"name": None, "value": None}],
    "resources": {"limits": None, "requests": None},
    "securityContext": {
        "allowPrivilegeEscalation": None, "privileged": None,
        "capabilities": {"add": None, "drop": None}, "runAsUser": None, "runAsGroup": None,
        "runAsNonRoot": None, "readOnlyRootFilesystem": None, "seccompProfile": _SECCOMP,
    },
    "volumeMounts": [{"name": None, "mountPath": None, "readOnly": None}],
}  # fmt: skip
POD: Schema = {
    "apiVersion": None, "kind": None,
    "metadata": {
        "name": None, "namespace": None, "labels": None, "annotations": None,
        "ownerReferences": None,
    },
    "spec": {
        "containers": [_CONTAINER], "restartPolicy": None, "shareProcessNamespace": None,
        "activeDeadlineSeconds": None, "automountServiceAccountToken": None,
        "serviceAccountName": None, "enableServiceLinks": None, "hostname": None,
        "terminationGracePeriodSeconds": None,
        "securityContext": {
            "runAsUser": None, "runAsGroup": None, "fsGroup": None, "runAsNonRoot": None,
            "seccompProfile": _SECCOMP,
        },
        "volumes": [{"name": None, "emptyDir": {"medium": None, "sizeLimit": None}}],
    },
}  # fmt: skip
RESOURCES = {"cpu", "memory", "ephemeral-storage"}


class Refused(ValueError):
    """A field or value this stand-in does not implement; the pod is not made."""


class NotCreated(Exception):
    """The pod is accepted but its container cannot be made on this node: the
    container's waiting ``reason`` and ``message``, as a kubelet reports them."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason, self.message = reason, message


@dataclass
class PodPlan:
    name: str
    container: str
    pod_args: list[str]
    run_args: list[str]
    dirs: list[Path] = field(default_factory=list)
    tmpfs: dict[Path, int | None] = field(default_factory=dict)  # memory volumes' sizes
    fs_group: int | None = None
    grace_s: int = 30
    deadline_s: float | None = None
    box: str = "sandbox"  # the container's name in the pod spec
    ephemeral: str | None = None  # its ephemeral-storage limit, as written ("64Mi")

    def disk_volumes(self) -> list[Path]:
        """The node-disk (not memory-backed) emptyDir directories: what counts,
        with the writable layer, against the ephemeral-storage limit."""
        return [d for d in self.dirs if d not in self.tmpfs]

    def make_dirs(self) -> None:
        """The node's directories of the pod's disk ``emptyDir`` volumes, as the kubelet
        makes them: world-writable, or owned by ``fsGroup`` with the setgid bit."""
        for path in self.dirs:
            path.mkdir(parents=True)
            mode = 0o777
            if path in self.tmpfs:
                size = self.tmpfs[path]
                options = "mode=1777" + (f",size={size}" if size else "")
                subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
                               check=True, capture_output=True)  # fmt: skip
                mode = 0o1777
            if self.fs_group is not None:
                os.chown(path, -1, self.fs_group)
                mode |= 0o2000
            path.chmod(mode)

    def remove_dirs(self) -> None:
        for path in self.tmpfs:
            subprocess.run(["umount", str(path)], check=False, capture_output=True)
        for path in self.dirs:
            shutil.rmtree(path, ignore_errors=True)


def unknown_fields(wire: Any, schema: Any, path: str = "") -> list[str]:
    """Paths in ``wire`` that ``schema`` does not name (a leaf schema is None)."""
    if schema is None:
        return []
    if isinstance(schema, list):
        return [
            p
            for i, item in enumerate(wire)
            for p in unknown_fields(item, schema[0], f"{path}[{i}]")
        ]
    found = []
    for key, value in wire.items():
        where = f"{path}.{key}" if path else key
        if key not in schema:
            found.append(where)
        else:
            found += unknown_fields(value, schema[key], where)
    return found


def _seccomp(profile: dict[str, Any], root: Path) -> list[str]:
    kind, local = profile.get("type"), profile.get("localhostProfile")
    if kind == "RuntimeDefault" and local is None:
        return []
    if kind == "Unconfined" and local is None:
        return ["--security-opt", "seccomp=unconfined"]
    if kind != "Localhost" or not local:
        raise Refused(f"seccompProfile {profile}: not a valid profile")
    if local.startswith("/") or ".." in local.split("/"):
        raise Refused(f"seccompProfile.localhostProfile {local!r}: must be a descending path")
    file = root / local
    if not file.is_file():
        raise NotCreated(
            "CreateContainerError", f"cannot load seccomp profile {file}: no such file"
        )
    return ["--security-opt", f"seccomp={file}"]


def _volumes(
    spec: dict[str, Any], memory: int | None, node_dir: Path
) -> dict[str, tuple[Path, int | None, bool]]:
    """name -> (its node directory, its tmpfs size, whether it is a tmpfs)."""
    found: dict[str, tuple[Path, int | None, bool]] = {}
    for vol in spec.get("volumes", []):
        name, empty = vol["name"], vol.get("emptyDir")
        if empty is None:
            raise Refused(f"volume {name}: only emptyDir volumes are offered")
        medium, size = empty.get("medium", ""), empty.get("sizeLimit")
        if medium == "Memory":
            limit = int(parse_quantity(size)) if size is not None else memory
            found[name] = (node_dir / name, limit, True)
        elif medium == "" and size is None:
            found[name] = (node_dir / name, None, False)
        else:
            raise Refused(
                f"volume {name}: emptyDir medium {medium!r} with sizeLimit {size} "
                "(a node-disk limit is the kubelet's eviction, not run here)"
            )
    return found


def _limits(resources: dict[str, Any]) -> tuple[list[str], int | None]:
    for kind in ("limits", "requests"):
        extra = set(resources.get(kind) or {}) - RESOURCES
        if extra:
            raise Refused(f"resources.{kind}: {sorted(extra)} not offered")
    limits, args, memory = resources.get("limits") or {}, [], None
    if "cpu" in limits:
        args += ["--cpus", str(parse_quantity(limits["cpu"]))]
    if "memory" in limits:
        memory = int(parse_quantity(limits["memory"]))
        args += ["--memory", f"{memory}b", "--memory-swap", f"{memory}b"]
    return args, memory


def plan(wire: dict[str, Any], *, seccomp_root: Path, node_dir: Path) -> PodPlan:
    """How Podman runs the pod ``wire``; raises :class:`Refused` or :class:`NotCreated`."""
    unknown = unknown_fields(wire, POD)
    if unknown:
        raise Refused(f"fields this stand-in does not understand: {', '.join(unknown)}")
    name, spec = wire["metadata"]["name"], wire["spec"]
    if len(spec["containers"]) != 1:
        raise Refused("spec.containers: one container per pod is offered")
    if spec.get("restartPolicy") != "Never":
        raise Refused(f"spec.restartPolicy {spec.get('restartPolicy')!r}: only Never is offered")
    if spec.get("automountServiceAccountToken") is not False:
        raise Refused("spec.automountServiceAccountToken must be false: no tokens here")
    (box,) = spec["containers"]
    if box.get("imagePullPolicy") == "Always":
        raise Refused("imagePullPolicy Always: there is no registry here")
    pod_ctx, ctx = spec.get("securityContext") or {}, box.get("securityContext") or {}
    if ctx.get("privileged"):
        raise Refused("privileged containers are not offered")
    uid = ctx.get("runAsUser", pod_ctx.get("runAsUser"))
    gid = ctx.get("runAsGroup", pod_ctx.get("runAsGroup"))
    if gid is not None and uid is None:
        raise Refused("runAsGroup without runAsUser is not offered")
    if ctx.get("runAsNonRoot", pod_ctx.get("runAsNonRoot")) and not uid:
        raise NotCreated("CreateContainerConfigError",
                         "container has runAsNonRoot and image will run as root")  # fmt: skip
    seccomp = _seccomp(ctx.get("seccompProfile") or pod_ctx.get("seccompProfile") or
                       {"type": "RuntimeDefault"}, seccomp_root)  # fmt: skip
    limit_args, memory = _limits(box.get("resources") or {})
    fs_group = pod_ctx.get("fsGroup")
    volumes = _volumes(spec, memory, node_dir)
    shares = "ipc,net,uts" + (",pid" if spec.get("shareProcessNamespace") else "")
    pod_args = ["pod", "create", "--name", name, "--network", "none", "--share", shares]
    if spec.get("hostname"):
        pod_args += ["--hostname", spec["hostname"]]
    container = f"{name}-{box['name']}"
    run = ["run", "-d", "--pod", name, "--name", container, *limit_args, *seccomp]
    if box.get("command"):
        run += ["--entrypoint", json.dumps(box["command"])]
    if box.get("workingDir"):
        run += ["--workdir", box["workingDir"]]
    for env in box.get("env", []):
        run += ["--env", f"{env['name']}={env.get('value', '')}"]
    if uid is not None:
        run += ["--user", f"{uid}" if gid is None else f"{uid}:{gid}"]
    if fs_group is not None:
        run += ["--group-add", str(fs_group)]
    caps = ctx.get("capabilities") or {}
    run += [a for cap in caps.get("drop", []) for a in ("--cap-drop", cap)]
    run += [a for cap in caps.get("add", []) for a in ("--cap-add", cap)]
    if ctx.get("allowPrivilegeEscalation") is False:
        run += ["--security-opt", "no-new-privileges"]
    if ctx.get("readOnlyRootFilesystem"):
        run += ["--read-only", "--read-only-tmpfs=false"]
    for mount in box.get("volumeMounts", []):
        if mount["name"] not in volumes:
            raise Refused(f"volumeMount {mount['name']}: no such volume")
        source = volumes[mount["name"]][0]
        ro = ",ro" if mount.get("readOnly") else ""
        run += ["--mount", f"type=bind,source={source},destination={mount['mountPath']}{ro}"]
    run += [box["image"], *box.get("args", [])]
    dirs = [d for d, _, _ in volumes.values()]
    tmpfs = {d: size for d, size, memory_backed in volumes.values() if memory_backed}
    grace = spec.get("terminationGracePeriodSeconds", 30)
    deadline = spec.get("activeDeadlineSeconds")
    ephemeral = ((box.get("resources") or {}).get("limits") or {}).get("ephemeral-storage")
    return PodPlan(
        name, container, pod_args, run, dirs, tmpfs, fs_group, grace, deadline, box["name"],
        None if ephemeral is None else str(ephemeral),
    )  # fmt: skip

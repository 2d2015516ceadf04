"""What a sandbox's pod and its run's owner object carry, and how they are read back.

Every pod is built here as the client's own models (:func:`sandbox_pod`):
limits from the sandbox's resources, labels naming the runtime
(``megaflow.io/owner``), the run, the sandbox and the runtime instance, the
exact values (run id, holder, deadline, creator) as annotations, an
``activeDeadlineSeconds`` past the spec's ``ttl_s``, an ownerReference to the
run's owner ConfigMap (:func:`run_owner`), and a locked-down security
context (:mod:`~megaflow.environment.kubernetes.security`: the sandboxes'
seccomp profile, dropped capabilities, and with ``disk_mb`` a read-only root
and sized volumes on every writable path). :func:`from_pod` rebuilds a
:class:`SandboxInfo` from a listed pod and :func:`stale` decides from the
pod alone whether the reaper removes it, so both work from the API server's
state, also after a crash.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

from kubernetes import client as k8s

from megaflow.core.errors import SandboxStartError
from megaflow.environment.abstract import EnvironmentSpec, SandboxInfo
from megaflow.environment.config import KubernetesRuntimeConfig
from megaflow.environment.container.labels import populates
from megaflow.environment.container.scripts import KEEPER_SCRIPT
from megaflow.environment.kubernetes.security import container_security, writable_volumes

CONTAINER = "sandbox"
OWNER = "megaflow.io/owner"
RUN = "megaflow.io/run"
SANDBOX = "megaflow.io/sandbox"
INSTANCE = "megaflow.io/instance"
NETWORK = "megaflow.io/network"
RUN_ID = "megaflow.io/run-id"
HOLDER = "megaflow.io/holder"
CREATED = "megaflow.io/created"
DEADLINE = "megaflow.io/deadline"
IMAGE = "megaflow.io/image"
CREATOR = "megaflow.io/creator-pod"
NO_RUN = "-"  # run of sandboxes nobody holds yet (a pool's spares): the runtime's own
_LABEL_OK = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$")


def run_of(holder: str | None, instance: str) -> str:
    """The run a sandbox belongs to: the first part of its holder's sample id
    (``<run>/<task>/<n>``), or this runtime instance's own run for spares."""
    if holder and "/" in holder:
        return holder.split("/", 1)[0]
    return f"{NO_RUN}{instance}"


def label_value(value: str) -> str:
    """``value`` as a label value: itself when valid, else a readable part and a hash."""
    if _LABEL_OK.match(value):
        return value
    digest = hashlib.sha256(value.encode()).hexdigest()[:12]
    readable = re.sub(r"[^A-Za-z0-9._-]", "-", value)[:40].strip("-._")
    return f"{readable}-{digest}" if readable else digest


def owner_name(config: KubernetesRuntimeConfig, run: str) -> str:
    """The owner ConfigMap of ``run`` (a DNS name, one per run and runtime label)."""
    return f"{config.label}-run-{hashlib.sha256(run.encode()).hexdigest()[:16]}"


def selector(config: KubernetesRuntimeConfig, **labels: str) -> str:
    """A label selector for this runtime's objects, narrowed by ``labels``."""
    return ",".join([f"{OWNER}={config.label}", *(f"{k}={v}" for k, v in labels.items())])


def run_owner(config: KubernetesRuntimeConfig, run: str) -> k8s.V1ConfigMap:
    """The per-run object every pod of ``run`` names as its owner: deleting it
    makes the cluster's garbage collector delete the run's pods."""
    return k8s.V1ConfigMap(
        api_version="v1",
        kind="ConfigMap",
        metadata=k8s.V1ObjectMeta(
            name=owner_name(config, run),
            namespace=config.namespace,
            labels={OWNER: config.label, RUN: label_value(run)},
            annotations={RUN_ID: run},
        ),
        data={"run": run},
    )


def _quantities(
    config: KubernetesRuntimeConfig, spec: EnvironmentSpec
) -> k8s.V1ResourceRequirements:
    res = spec.resources
    limits = {"cpu": f"{math.ceil(res.cpus * 1000)}m", "memory": f"{res.memory_mb}Mi"}
    share = config.request_share
    requests = {
        "cpu": f"{max(1, math.ceil(res.cpus * 1000 * share))}m",
        "memory": f"{max(1, math.ceil(res.memory_mb * share))}Mi",
    }
    if res.disk_mb is not None:
        limits["ephemeral-storage"] = requests["ephemeral-storage"] = f"{res.disk_mb}Mi"
    return k8s.V1ResourceRequirements(limits=limits, requests=requests)


def image_of(config: KubernetesRuntimeConfig, spec: EnvironmentSpec) -> str:
    """The image a pod of ``spec`` runs; raises ``SandboxStartError`` for what a
    cluster cannot pull (the host's root, a root-filesystem path)."""
    if spec.image == "host":
        if not config.host_image:
            raise SandboxStartError(
                "image 'host' (the host's root) cannot run in a pod; give an image name, "
                "or set host_image in the kubernetes runtime config"
            )
        return config.host_image
    if spec.image.startswith(("/", ".", "~")):
        raise SandboxStartError(
            f"image {spec.image!r} is a path on this host; a cluster pulls images from a "
            "registry: push it (podman import + push) and give its name"
        )
    return spec.image


def sandbox_pod(
    config: KubernetesRuntimeConfig,
    spec: EnvironmentSpec,
    info: SandboxInfo,
    owner: Any,
    *,
    instance: str,
    creator: str,
) -> k8s.V1Pod:
    """The pod of one sandbox, owned by its run's ``owner`` (as created, with its uid)."""
    if spec.network == "host":
        raise SandboxStartError(
            "network 'host' is not offered by the kubernetes runtime (a pod on the node's "
            "network reaches everything the node does); use 'none' or 'loopback'"
        )
    run = (owner.data or {})["run"]
    labels = {
        OWNER: config.label, RUN: label_value(run), SANDBOX: info.id,
        INSTANCE: instance, NETWORK: spec.network,
    }  # fmt: skip
    annotations = {
        RUN_ID: run, HOLDER: info.owner or "", CREATED: repr(info.created_at),
        DEADLINE: repr(info.deadline), IMAGE: spec.image, CREATOR: creator,
    }  # fmt: skip
    uid = config.run_as_user
    non_root = uid is not None
    volumes, mounts = writable_volumes(config, spec)
    container = k8s.V1Container(
        name=CONTAINER,
        image=image_of(config, spec),
        image_pull_policy=config.image_pull_policy,
        command=["/bin/sh", "-c", KEEPER_SCRIPT, spec.workdir]
        + ([] if populates(spec) else ["snapshot"]),
        working_dir=spec.workdir,
        env=[k8s.V1EnvVar(name=k, value=v) for k, v in sorted(spec.env.items())],
        resources=_quantities(config, spec),
        security_context=container_security(config, spec),
        volume_mounts=mounts,
    )
    return k8s.V1Pod(
        api_version="v1",
        kind="Pod",
        metadata=k8s.V1ObjectMeta(
            name=info.id,
            namespace=config.namespace,
            labels=labels,
            annotations=annotations,
            owner_references=[
                k8s.V1OwnerReference(
                    api_version="v1",
                    kind="ConfigMap",
                    name=owner.metadata.name,
                    uid=owner.metadata.uid,
                    controller=False,
                    block_owner_deletion=False,
                )
            ],
        ),
        spec=k8s.V1PodSpec(
            containers=[container],
            restart_policy="Never",
            # the pod's pause process is PID 1 and reaps what a command orphans; the
            # keeper (a shell blocked in read) would leave them zombies
            share_process_namespace=True,
            active_deadline_seconds=math.ceil(spec.ttl_s + config.deadline_grace_s),
            automount_service_account_token=False,
            service_account_name=config.service_account,
            enable_service_links=False,
            hostname="sandbox",
            termination_grace_period_seconds=0,
            runtime_class_name=config.runtime_class,
            node_selector=dict(config.node_selector) or None,
            image_pull_secrets=[
                k8s.V1LocalObjectReference(name=n) for n in config.image_pull_secrets
            ]
            or None,
            security_context=k8s.V1PodSecurityContext(
                run_as_user=uid,
                run_as_group=uid,
                fs_group=uid,
                run_as_non_root=True if non_root else None,
            ),
            volumes=volumes,
        ),
    )


def _meta(pod: Any) -> tuple[dict[str, str], dict[str, str]]:
    meta = pod.metadata
    return dict(meta.labels or {}), dict(meta.annotations or {})


def from_pod(pod: Any) -> SandboxInfo:
    """A listed pod's record, from its labels and annotations."""
    labels, notes = _meta(pod)
    phase = pod.status.phase if pod.status is not None else None
    state = {"Running": "ready", "Pending": "starting"}.get(phase or "", "stopped")
    return SandboxInfo(
        id=labels.get(SANDBOX) or pod.metadata.name,
        runtime="kubernetes",
        state=state,  # type: ignore[arg-type]
        owner=notes.get(HOLDER) or None,
        created_at=float(notes.get(CREATED) or 0),
        deadline=float(notes.get(DEADLINE) or 0),
        image=notes.get(IMAGE) or "",
    )


def stale(pod: Any, now: float, *, start_timeout_s: float, live_runs: set[str]) -> str | None:
    """Why the reaper removes ``pod``, or None to keep it: past its deadline (a
    claim held longer than its sandbox may live), ended (its main process died,
    or its activeDeadlineSeconds struck), stuck pending past the start timeout,
    or its run's owner object is gone (the run finished)."""
    labels, notes = _meta(pod)
    if pod.metadata.deletion_timestamp is not None:
        return None  # already going
    if float(notes.get(DEADLINE) or "inf") <= now:
        return "deadline"
    phase = pod.status.phase if pod.status is not None else None
    if phase in ("Succeeded", "Failed"):
        return "ended"
    age = now - float(notes.get(CREATED) or now)
    if phase in (None, "Pending", "Unknown") and age > start_timeout_s + 30:
        return "stuck"
    if notes.get(RUN_ID) is not None and labels.get(RUN) not in live_runs:
        return "run gone"
    return None

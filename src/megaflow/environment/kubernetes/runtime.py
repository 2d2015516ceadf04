"""The ``kubernetes`` runtime: sandboxes are pods, made through the official Python client.

One sandbox is one pod whose main process only idles (the container
runtime's keeper script); commands run as execs over the API server's
stream (:mod:`megaflow.environment.kubernetes.exec`). Every pod is owned by
its run's owner ConfigMap, made once per run (:func:`~megaflow.environment.
kubernetes.pods.run_owner`), so deleting that object (:meth:`KubernetesRuntime.
finish_run`, or ``kubectl delete``) has the cluster delete the run's pods.
``list`` and ``reap_orphans`` work from labels and annotations alone
(:mod:`megaflow.environment.kubernetes.pods`): the reaper deletes pods past
their deadline, ended, stuck pending, or whose run's owner object is gone,
at start and every ``reap_interval_s``. Blocking client calls run off the
event loop (:class:`~megaflow.environment.kubernetes.api.KubeApi`).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import os
import socket
import time
import uuid
from typing import Any

from kubernetes.client.exceptions import ApiException

from megaflow.core.errors import SandboxStartError, TransportError
from megaflow.environment.abstract import EnvironmentSpec, Runtime, Sandbox, SandboxInfo
from megaflow.environment.config import KubernetesRuntimeConfig
from megaflow.environment.container.labels import populates
from megaflow.environment.container.tar import files_tar, repo_tar
from megaflow.environment.kubernetes.api import KubeApi, is_status
from megaflow.environment.kubernetes.pods import (
    CONTAINER,
    RUN,
    from_pod,
    label_value,
    owner_name,
    run_of,
    run_owner,
    sandbox_pod,
    selector,
    stale,
)
from megaflow.environment.kubernetes.sandbox import KubernetesSandbox
from megaflow.monitoring.environment import EnvironmentMetrics

POLL_S = (0.05, 1.0)  # first and longest pause between reads of a starting pod
FAILED_WAITING = {
    "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName",
    "CreateContainerConfigError", "CreateContainerError", "RunContainerError",
    "CrashLoopBackOff",
}  # fmt: skip


class KubernetesRuntime(Runtime):
    """Sandboxes as pods of one namespace; ``api`` replaces the client (tests)."""

    name = "kubernetes"

    def __init__(
        self,
        config: KubernetesRuntimeConfig | None = None,
        metrics: EnvironmentMetrics | None = None,
        api: Any | None = None,
    ) -> None:
        self.config = config or KubernetesRuntimeConfig()
        self.metrics = metrics
        self.instance = uuid.uuid4().hex[:12]
        self.creator = os.environ.get("HOSTNAME") or socket.gethostname()
        """The pod (or host) this runtime runs in, recorded on every sandbox pod."""
        self.kube = KubeApi(self.config, api)
        self._mine: dict[str, KubernetesSandbox] = {}
        self._owners: dict[str, Any] = {}  # run -> its owner ConfigMap, as created
        self._owner_lock = asyncio.Lock()
        self._reap_task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.kube.run(self.kube.core)
        if self.config.reap_on_start:
            await self.reap_orphans()
        if self.config.reap_interval_s is not None:
            self._reap_task = asyncio.get_running_loop().create_task(self._reap_loop())

    async def _reap_loop(self) -> None:
        assert self.config.reap_interval_s is not None
        while True:
            await asyncio.sleep(self.config.reap_interval_s)
            with contextlib.suppress(ApiException, TransportError, OSError):
                await self.reap_orphans()

    async def stop(self) -> None:
        """Stop reaping, delete the pods this runtime made, then the owner objects of
        its runs that no pod (of any runtime) still names, and close the client."""
        if self._reap_task is not None:
            self._reap_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reap_task
            self._reap_task = None
        await asyncio.gather(*(sb.destroy() for sb in list(self._mine.values())))
        self._mine.clear()
        for run in list(self._owners):
            pods = await self._pods(**{RUN: label_value(run)})
            if not [p for p in pods if p.metadata.deletion_timestamp is None]:
                await self._delete_owner(run)
        self.kube.close()

    # -- owner objects ----------------------------------------------------------

    async def _owner(self, run: str) -> Any:
        """The owner ConfigMap of ``run``, created on first use (or found if another
        runtime made it)."""
        async with self._owner_lock:
            if run in self._owners:
                return self._owners[run]
            body = run_owner(self.config, run)
            ns = self.config.namespace
            try:
                made = await self.kube.call("create_namespaced_config_map", ns, body)
            except ApiException as e:
                if not is_status(e, 409):
                    raise
                name = owner_name(self.config, run)
                made = await self.kube.call("read_namespaced_config_map", name, ns)
            self._owners[run] = made
            return made

    async def _delete_owner(self, run: str) -> None:
        self._owners.pop(run, None)
        name, ns = owner_name(self.config, run), self.config.namespace
        try:
            await self.kube.call(
                "delete_namespaced_config_map", name, ns, propagation_policy="Background"
            )
        except ApiException as e:
            if not is_status(e, 404):
                raise

    async def finish_run(self, run: str) -> int:
        """A run is over: delete its owner object (the cluster deletes its pods) and
        its pods directly, not waiting for the garbage collector. Returns the pods."""
        pods = await self._pods(**{RUN: label_value(run)})
        await self._delete_owner(run)
        for pod in pods:
            name = pod.metadata.name
            sandbox = self._mine.get(name)
            await (sandbox.destroy() if sandbox is not None else self.delete_pod(name))
        return len(pods)

    # -- sandboxes -------------------------------------------------------------

    async def create(self, spec: EnvironmentSpec, owner: str | None = None) -> Sandbox:
        started = time.monotonic()
        now = time.time()
        info = SandboxInfo(
            id=f"{self.config.label}-{uuid.uuid4().hex[:16]}", runtime=self.name,
            state="starting", owner=owner, created_at=now, deadline=now + spec.ttl_s,
            image=spec.image,
        )  # fmt: skip
        if self.metrics:
            self.metrics.moved(self.name, None, "starting")
        sandbox = KubernetesSandbox(self, info, spec)
        created = False
        run = run_of(owner, self.instance)
        try:
            run_owner_obj = await self._owner(run)
            pod = sandbox_pod(self.config, spec, info, run_owner_obj,
                              instance=self.instance, creator=self.creator)  # fmt: skip
            created = True  # from here on a pod may exist, even if the call fails
            await self.kube.call("create_namespaced_pod", self.config.namespace, pod)
            await self._wait_running(info.id)
            await self._populate(sandbox, spec)
        except BaseException as e:
            self._failed("start")
            if self.metrics:
                self.metrics.moved(self.name, info.state, None)
            if created:
                await asyncio.shield(self._delete_quietly(info.id))
            self._owners.pop(run, None)  # read again next time: it may have been deleted
            if isinstance(e, SandboxStartError) or not isinstance(e, Exception):
                raise
            reason = e.reason if isinstance(e, ApiException) else e
            raise SandboxStartError(
                f"sandbox pod from image {spec.image!r} failed to start in namespace "
                f"{self.config.namespace!r} of {self.kube.server}: {reason}"
            ) from e
        sandbox.start_seconds = time.monotonic() - started
        sandbox.set_state("ready")
        if self.metrics:
            self.metrics.start_seconds.labels(self.name, "cold").observe(sandbox.start_seconds)
        self._mine[info.id] = sandbox
        return sandbox

    async def _wait_running(self, name: str) -> None:
        """Until the pod's container runs; ``SandboxStartError`` when it cannot."""
        deadline = time.monotonic() + self.config.start_timeout_s
        pause = POLL_S[0]
        while True:
            pod = await self.kube.call("read_namespaced_pod", name, self.config.namespace)
            status = pod.status
            phase = status.phase if status is not None else None
            if phase in ("Succeeded", "Failed"):
                why = (status.message or status.reason or phase) if status else phase
                raise SandboxStartError(f"sandbox pod {name} ended before it ran: {why}")
            for cs in (status.container_statuses or []) if status is not None else []:
                if cs.name != CONTAINER or cs.state is None:
                    continue
                if cs.state.running is not None:
                    return
                waiting = cs.state.waiting
                if waiting is not None and waiting.reason in FAILED_WAITING:
                    why = f"sandbox pod {name}: {waiting.reason}: {waiting.message or ''}"
                    raise SandboxStartError(why.strip() + self._hint(waiting.message or ""))
            if time.monotonic() > deadline:
                raise SandboxStartError(
                    f"sandbox pod {name} did not run within start_timeout_s="
                    f"{self.config.start_timeout_s} (phase {phase}); see `kubectl describe pod`"
                )
            await asyncio.sleep(pause)
            pause = min(pause * 2, POLL_S[1])

    def _hint(self, message: str) -> str:
        """What to do about a start error the node's set-up causes."""
        if "seccomp" not in message or self.config.seccomp_profiles is None:
            return ""
        return (
            f"; every node needs the sandbox seccomp profiles under its kubelet seccomp root, "
            f"in {self.config.seccomp_profiles}/ (write them with `megaflow sandbox "
            "seccomp-profile`, see docs/kubernetes.md), or set seccomp_profiles: null in the "
            "kubernetes runtime config for the runtime's default profile"
        )

    async def _populate(self, sandbox: KubernetesSandbox, spec: EnvironmentSpec) -> None:
        """Files, repo and setup commands; then the snapshot that ``reset`` restores."""
        if spec.repo is not None:
            await sandbox.upload(await self.kube.run(repo_tar, spec.repo), spec.workdir)
        if spec.files:
            data = {k: v.encode() for k, v in spec.files.items()}
            await sandbox.upload(files_tar(data), spec.workdir)
        for command in spec.setup:
            r = await sandbox.exec(command, timeout=self.config.setup_timeout_s)
            if not r.ok:
                why = "timed out" if r.timed_out else f"exited {r.exit_code}"
                tail = (r.stderr or r.stdout)[-2000:]
                raise SandboxStartError(f"setup command {command!r} {why}: {tail}")
        if populates(spec):
            await sandbox.snapshot()

    async def _pods(self, **labels: str) -> builtins.list[Any]:
        found = await self.kube.call(
            "list_namespaced_pod", self.config.namespace,
            label_selector=selector(self.config, **labels),
        )  # fmt: skip
        return list(found.items or [])

    async def list(self) -> list[SandboxInfo]:
        """Every sandbox pod of this runtime label in the namespace, from any process."""
        return [from_pod(p) for p in await self._pods()]

    async def destroy(self, sandbox_id: str) -> None:
        sandbox = self._mine.pop(sandbox_id, None)
        if sandbox is not None:
            await sandbox.destroy()
        elif sandbox_id.startswith(f"{self.config.label}-"):  # never a stranger's pod
            await self.delete_pod(sandbox_id)

    def forget(self, sandbox_id: str) -> None:
        """Stop tracking a sandbox; its ``destroy`` calls this."""
        self._mine.pop(sandbox_id, None)

    async def delete_pod(self, name: str) -> None:
        """Delete a pod at once; a no-op when it is already gone."""
        try:
            await self.kube.call(
                "delete_namespaced_pod", name, self.config.namespace,
                grace_period_seconds=0, propagation_policy="Background",
            )  # fmt: skip
        except ApiException as e:
            if not is_status(e, 404):
                raise

    async def _delete_quietly(self, name: str) -> None:
        with contextlib.suppress(ApiException, TransportError, OSError):
            await self.delete_pod(name)

    async def reap_orphans(self) -> int:
        """Delete pods past their deadline, ended, stuck pending, or of finished runs
        (their owner object is gone). Pods are listed before owners, so a pod made
        meanwhile always finds its run's owner in the second list."""
        pods = await self._pods()
        owners = await self.kube.call(
            "list_namespaced_config_map", self.config.namespace,
            label_selector=selector(self.config),
        )  # fmt: skip
        live = {(o.metadata.labels or {}).get(RUN, "") for o in owners.items or []}
        now, reaped = time.time(), 0
        for pod in pods:
            why = stale(pod, now, start_timeout_s=self.config.start_timeout_s, live_runs=live)
            if why is None:
                continue
            name = pod.metadata.name
            sandbox = self._mine.pop(name, None)
            if sandbox is not None:
                await sandbox.destroy()
            else:
                await self.delete_pod(name)
            reaped += 1
        if reaped and self.metrics:
            self.metrics.failures.labels(self.name, "reaped").inc(reaped)
        return reaped

    def _failed(self, kind: str) -> None:
        if self.metrics:
            self.metrics.failed(self.name, kind)

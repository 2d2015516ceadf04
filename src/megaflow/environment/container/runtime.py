"""The ``container`` runtime: sandboxes are containers of a Docker-compatible engine.

Works against Docker and against Podman's Docker-compatible service (``podman
system service``), through the ``docker`` Python SDK (the ``container``
extra). One sandbox is one container whose main process only idles; commands
run as execs (see :mod:`megaflow.environment.container.exec` for output caps and
timeouts). Every container carries labels with its sandbox id, owner,
deadline and the host, pid and instance of the runtime that made it, so
``list`` and ``reap_orphans`` work from the engine's state alone, also after a
crash (:mod:`megaflow.environment.container.labels`). The engine's client
and threads are an :class:`~megaflow.environment.container.engine.Engine`,
which also resolves images once per runtime (a name present in the engine,
one loaded from an archive folder or pulled from a mirror or its registry, or
a root-filesystem tarball or directory imported under a content-addressed
tag); the time that took is kept in ``image_load_seconds``, apart from the
sandboxes' start times. The images it brought in are cached under a size
bound and loaded ahead for upcoming specs (:meth:`ContainerRuntime.prefetch`,
:mod:`megaflow.environment.container.image_cache`).
"""

from __future__ import annotations

import asyncio
import builtins
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import docker
from docker.errors import APIError
from docker.errors import NotFound as DockerNotFound

from megaflow.core.errors import SandboxStartError, TransportError
from megaflow.environment.abstract import EnvironmentSpec, Runtime, Sandbox, SandboxInfo
from megaflow.environment.config import ContainerRuntimeConfig
from megaflow.environment.container.engine import Engine, P, T, engine_urls
from megaflow.environment.container.labels import (
    container_args,
    from_labels,
    is_orphan,
    populates,
)
from megaflow.environment.container.sandbox import ContainerSandbox
from megaflow.environment.container.seccomp import Profiles
from megaflow.environment.container.tar import files_tar, repo_tar
from megaflow.monitoring.environment import EnvironmentMetrics


class ContainerRuntime(Runtime):
    """Sandboxes as containers of a Docker-compatible engine (Docker or Podman)."""

    name = "container"

    def __init__(
        self,
        config: ContainerRuntimeConfig | None = None,
        metrics: EnvironmentMetrics | None = None,
    ) -> None:
        self.config = config or ContainerRuntimeConfig()
        self.metrics = metrics
        self.instance = uuid.uuid4().hex[:12]
        self.host = socket.gethostname()
        self.engine = Engine(self.config, self._image_loaded)
        self._mine: dict[str, ContainerSandbox] = {}
        self.seccomp = Profiles()

    # -- engine -----------------------------------------------------------------

    @property
    def url(self) -> str | None:
        """The engine URL in use, once connected."""
        return self.engine.url

    @property
    def image_load_seconds(self) -> dict[str, float]:
        """Per image given in a spec: seconds its first use spent loading or pulling it."""
        images = self.engine.images
        return dict(images.resolver.load_seconds) if images else {}

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """A short blocking engine call, off the event loop (:meth:`Engine.run`)."""
        return await self.engine.run(fn, *args, **kwargs)

    async def run_stream(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """A blocking exec stream read, off the event loop (:meth:`Engine.run_stream`)."""
        return await self.engine.run_stream(fn, *args, **kwargs)

    def client(self) -> docker.DockerClient:
        """The engine client; connects on first use. Raises ``TransportError``."""
        return self.engine.client()

    def _image_loaded(self, seconds: float) -> None:
        if self.metrics:
            self.metrics.image_load_seconds.labels(self.name).observe(seconds)

    async def start(self) -> None:
        await self.run(self.client)
        if self.config.reap_on_start:
            await self.reap_orphans()

    async def stop(self) -> None:
        """Destroy the sandboxes this runtime made, then close the client."""
        await asyncio.gather(*(sb.destroy() for sb in list(self._mine.values())))
        self._mine.clear()
        if self.engine.images is not None:
            await self.engine.images.close()
        self.engine.close()
        self.seccomp.close()

    # -- sandboxes -------------------------------------------------------------

    async def create(self, spec: EnvironmentSpec, owner: str | None = None) -> Sandbox:
        try:
            client = await self.run(self.client)
        except TransportError as e:
            self._failed("start")
            raise SandboxStartError(str(e)) from e
        images = self.engine.images
        assert images is not None
        try:
            image = self._image_of(spec)
            ref = await images.acquire(image)
        except SandboxStartError:
            self._failed("start")
            raise
        started = time.monotonic()
        now = time.time()
        info = SandboxInfo(
            id=f"{self.config.namespace}-{uuid.uuid4().hex[:16]}",
            runtime=self.name,
            state="starting",
            owner=owner,
            created_at=now,
            deadline=now + spec.ttl_s,
            image=spec.image,
        )
        container = None
        if self.metrics:
            self.metrics.moved(self.name, None, "starting")
        try:
            podman = await self.run(self.engine.is_podman)
            seccomp = self.seccomp.security_opt(spec.network, podman=podman)
            kwargs = container_args(
                self.config, spec, info, ref, host=self.host, instance=self.instance,
                seccomp=seccomp,
            )  # fmt: skip
            await self.run(self._check_limits, spec)
            container = await self.run(client.containers.create, **kwargs)
            sandbox = ContainerSandbox(self, client, container.id, info, spec, image)
            await self.run(container.start)
            await self._populate(sandbox, spec)
        except BaseException as e:
            self._failed("start")
            if self.metrics:
                self.metrics.moved(self.name, info.state, None)
            if container is not None:
                await asyncio.shield(self.run(self.remove_container, container.id))
            images.release(image)
            if isinstance(e, SandboxStartError) or not isinstance(e, Exception):
                raise
            raise SandboxStartError(
                f"sandbox from image {spec.image!r} failed to start on {self.url}: {e}"
            ) from e
        sandbox.start_seconds = time.monotonic() - started
        sandbox.set_state("ready")
        if self.metrics:
            self.metrics.start_seconds.labels(self.name, "cold").observe(sandbox.start_seconds)
        self._mine[info.id] = sandbox
        return sandbox

    def _image_of(self, spec: EnvironmentSpec) -> str:
        if spec.image != "host":
            return spec.image
        if not self.config.host_image:
            raise SandboxStartError(
                "image 'host' (the host's root) cannot run in a container; give an image "
                "name or a root-filesystem tarball, or set host_image in the runtime config"
            )
        return self.config.host_image

    async def prefetch(self, specs: Sequence[EnvironmentSpec]) -> None:
        """Load the images of upcoming specs ahead, ``images.prefetch`` at a time,
        in the order given; later calls replace the list."""
        await self.run(self.client)
        assert self.engine.images is not None
        upcoming = [self._image_of(s) for s in specs if s.image != "host" or self.config.host_image]
        self.engine.images.plan(upcoming)

    def release_image(self, image: str) -> None:
        """A sandbox of ``image`` is gone (its ``destroy`` calls this)."""
        if self.engine.images is not None:
            self.engine.images.release(image)

    def _check_limits(self, spec: EnvironmentSpec) -> None:
        ncpu, mem_total = self.engine.facts()
        res = spec.resources
        if ncpu and res.cpus > ncpu:
            raise SandboxStartError(
                f"resources.cpus={res.cpus} exceeds the {ncpu} CPUs of the engine at {self.url}; "
                f"ask for at most {ncpu}"
            )
        if mem_total and res.memory_mb * 1024 * 1024 > mem_total:
            raise SandboxStartError(
                f"resources.memory_mb={res.memory_mb} exceeds the engine's "
                f"{mem_total // (1024 * 1024)} MiB; ask for less"
            )

    async def _populate(self, sandbox: ContainerSandbox, spec: EnvironmentSpec) -> None:
        """Files, repo and setup commands; then the snapshot that ``reset`` restores."""
        if spec.repo is not None:
            await sandbox.upload(await self.run(repo_tar, spec.repo), spec.workdir)
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

    async def list(self) -> list[SandboxInfo]:
        """Every sandbox of this namespace in the engine, from any process."""
        return [from_labels(c) for c in await self.run(self._containers)]

    def _containers(self) -> builtins.list[dict[str, Any]]:
        flt = {"label": f"megaflow.namespace={self.config.namespace}"}
        found: builtins.list[dict[str, Any]] = self.client().api.containers(all=True, filters=flt)
        return found

    async def destroy(self, sandbox_id: str) -> None:
        sandbox = self._mine.pop(sandbox_id, None)
        if sandbox is not None:
            await sandbox.destroy()
        elif sandbox_id.startswith(f"{self.config.namespace}-"):  # never a stranger's container
            await self.run(self.remove_container, sandbox_id)

    def forget(self, sandbox_id: str) -> None:
        """Stop tracking a sandbox; its ``destroy`` calls this."""
        self._mine.pop(sandbox_id, None)

    def remove_container(self, container: str) -> None:
        """Force-remove a container by id or name; a no-op when it is already gone."""
        try:
            self.client().api.remove_container(container, force=True, v=True)
        except DockerNotFound:
            pass
        except APIError as e:  # already being removed by someone else
            if e.status_code not in (404, 409):
                raise

    async def reap_orphans(self) -> int:
        """Remove sandboxes past their deadline, stopped ones, and those whose process died.

        A sandbox belongs to a dead process when it was made on this host by
        another runtime instance whose pid no longer runs (a crash).
        """
        now, reaped = time.time(), 0
        for c in await self.run(self._containers):
            orphan = is_orphan(c, now, start_timeout_s=self.config.start_timeout_s,
                               host=self.host, instance=self.instance)  # fmt: skip
            if orphan:
                await self.run(self.remove_container, c["Id"])
                self._mine.pop((c.get("Labels") or {}).get("megaflow.sandbox", ""), None)
                reaped += 1
        if reaped and self.metrics:
            self.metrics.failures.labels(self.name, "reaped").inc(reaped)
        return reaped

    def _failed(self, kind: str) -> None:
        if self.metrics:
            self.metrics.failed(self.name, kind)


__all__ = ["ContainerRuntime", "ContainerSandbox", "engine_urls"]

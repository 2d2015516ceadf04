"""The ``container`` runtime: sandboxes are containers of a Docker-compatible engine.

Works against Docker and against Podman's Docker-compatible service (``podman
system service``), through the ``docker`` Python SDK (the ``container``
extra). One sandbox is one container whose main process only idles; commands
run as execs (see :mod:`megaflow.environment.container.exec` for output caps and
timeouts). Every container carries labels with its sandbox id, owner,
deadline and the host, pid and instance of the runtime that made it, so
``list`` and ``reap_orphans`` work from the engine's state alone, also after a
crash. Images are resolved once per runtime (a name present in the engine, a
pulled name, or a root-filesystem tarball or directory imported under a
content-addressed tag); the time that took is kept in ``image_load_seconds``,
apart from the sandboxes' start times.
"""

from __future__ import annotations

import asyncio
import builtins
import functools
import os
import socket
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

import docker
from docker.errors import APIError, DockerException
from docker.errors import NotFound as DockerNotFound

from megaflow.core.errors import SandboxStartError, TransportError
from megaflow.environment.abstract import EnvironmentSpec, Runtime, Sandbox, SandboxInfo
from megaflow.environment.config import ContainerRuntimeConfig
from megaflow.environment.container.exec import KEEPER_SCRIPT
from megaflow.environment.container.images import ImageResolver
from megaflow.environment.container.sandbox import ContainerSandbox, from_labels
from megaflow.environment.container.tar import files_tar, repo_tar
from megaflow.monitoring.environment import EnvironmentMetrics

DEFAULT_SOCKETS = ("/var/run/docker.sock", "/run/podman/podman.sock")
START_HINT = (
    "start a Docker-compatible engine, e.g. `podman system service --time 0 "
    "unix:///run/podman/podman.sock` or the Docker daemon, and point the runtime "
    "at it (base_url in the config, or DOCKER_HOST)"
)


P = ParamSpec("P")
T = TypeVar("T")


def engine_urls(base_url: str | None) -> list[str]:
    """Where to look for the engine: the config, DOCKER_HOST, then the usual sockets."""
    if base_url:
        return [base_url]
    if os.environ.get("DOCKER_HOST"):
        return [os.environ["DOCKER_HOST"]]
    urls = [f"unix://{p}" for p in DEFAULT_SOCKETS]
    if os.environ.get("XDG_RUNTIME_DIR"):
        urls.append(f"unix://{os.environ['XDG_RUNTIME_DIR']}/podman/podman.sock")
    return urls


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


def _populates(spec: EnvironmentSpec) -> bool:
    """Whether creating the sandbox changes its workspace after the start."""
    return bool(spec.repo or spec.files or spec.setup)


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
        self._client: docker.DockerClient | None = None
        self._url: str | None = None
        self._images: ImageResolver | None = None
        self._mine: dict[str, ContainerSandbox] = {}
        self._ctl: ThreadPoolExecutor | None = None
        self._facts: dict[str, Any] | None = None  # the engine's CPUs and memory
        self._streams: ThreadPoolExecutor | None = None

    # -- engine -----------------------------------------------------------------

    @property
    def url(self) -> str | None:
        """The engine URL in use, once connected."""
        return self._url

    @property
    def image_load_seconds(self) -> dict[str, float]:
        """Per image given in a spec: seconds its first use spent loading or pulling it."""
        return dict(self._images.load_seconds) if self._images else {}

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a short blocking engine call on this runtime's control threads."""
        if self._ctl is None:
            self._ctl = ThreadPoolExecutor(16, thread_name_prefix="megaflow-engine")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._ctl, functools.partial(fn, *args, **kwargs))

    async def run_stream(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a blocking output stream read on this runtime's stream threads.

        Every running exec holds one while it streams, so streams get their own
        pool, sized like the connection pool: a timeout's kill and other short
        calls never wait behind long commands.
        """
        if self._streams is None:
            self._streams = ThreadPoolExecutor(
                self.config.max_connections, thread_name_prefix="megaflow-exec"
            )
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._streams, functools.partial(fn, *args, **kwargs))

    def client(self) -> docker.DockerClient:
        """The engine client; connects on first use. Raises ``TransportError``."""
        if self._client is not None:
            return self._client
        errors = []
        for url in engine_urls(self.config.base_url):
            try:
                c = docker.DockerClient(
                    base_url=url,
                    version="auto",
                    timeout=int(self.config.api_timeout_s),
                    max_pool_size=self.config.max_connections,
                )
            except DockerException as e:
                errors.append(f"{url}: {e}")
                continue
            self._client, self._url = c, url
            self._images = ImageResolver(c, self.config.pull, self._image_loaded)
            return c
        raise TransportError(
            f"no container engine answered at {', '.join(engine_urls(self.config.base_url))}; "
            f"{START_HINT}. Errors: {'; '.join(errors)}"
        )

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
        if self._client is not None:
            self._client.close()
            self._client = None
        for pool in (self._ctl, self._streams):
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
        self._ctl = self._streams = None

    # -- sandboxes -------------------------------------------------------------

    async def create(self, spec: EnvironmentSpec, owner: str | None = None) -> Sandbox:
        try:
            client = await self.run(self.client)
        except TransportError as e:
            self._failed("start")
            raise SandboxStartError(str(e)) from e
        assert self._images is not None
        image = spec.image
        try:
            if image == "host":
                if not self.config.host_image:
                    raise SandboxStartError(
                        "image 'host' (the host's root) cannot run in a container; give an image "
                        "name or a root-filesystem tarball, or set host_image in the runtime config"
                    )
                image = self.config.host_image
            ref = await self._images.resolve(image)
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
            kwargs = self._container_args(spec, info, ref)
            await self.run(self._check_limits, client, spec)
            container = await self.run(client.containers.create, **kwargs)
            sandbox = ContainerSandbox(self, client, container.id, info, spec)
            await self.run(container.start)
            await self._populate(sandbox, spec)
        except BaseException as e:
            self._failed("start")
            if self.metrics:
                self.metrics.moved(self.name, info.state, None)
            if container is not None:
                await asyncio.shield(self.run(self.remove_container, container.id))
            if isinstance(e, SandboxStartError) or not isinstance(e, Exception):
                raise
            raise SandboxStartError(
                f"sandbox from image {spec.image!r} failed to start on {self._url}: {e}"
            ) from e
        sandbox.start_seconds = time.monotonic() - started
        sandbox.set_state("ready")
        if self.metrics:
            self.metrics.start_seconds.labels(self.name, "cold").observe(sandbox.start_seconds)
        self._mine[info.id] = sandbox
        return sandbox

    def _container_args(self, spec: EnvironmentSpec, info: SandboxInfo, ref: str) -> dict[str, Any]:
        res = spec.resources
        labels = {
            "megaflow.namespace": self.config.namespace,
            "megaflow.sandbox": info.id,
            "megaflow.owner": info.owner or "",
            "megaflow.created": repr(info.created_at),
            "megaflow.deadline": repr(info.deadline),
            "megaflow.image": spec.image,
            "megaflow.host": self.host,
            "megaflow.pid": str(os.getpid()),
            "megaflow.instance": self.instance,
        }
        mem = f"{res.memory_mb}m"
        args: dict[str, Any] = {
            "image": ref,
            "command": ["/bin/sh", "-c", KEEPER_SCRIPT, spec.workdir]
            + ([] if _populates(spec) else ["snapshot"]),
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
            "init": self.config.init,
            "detach": True,
        }
        if res.disk_mb is not None:  # a sized tmpfs: portable, unlike storage quotas
            args["tmpfs"] = {spec.workdir: f"size={res.disk_mb}m,mode=0755"}
        return args

    def _check_limits(self, client: docker.DockerClient, spec: EnvironmentSpec) -> None:
        if self._facts is None:
            self._facts = client.info()
        facts = self._facts
        ncpu, mem_total = int(facts.get("NCPU") or 0), int(facts.get("MemTotal") or 0)
        res = spec.resources
        if ncpu and res.cpus > ncpu:
            raise SandboxStartError(
                f"resources.cpus={res.cpus} exceeds the {ncpu} CPUs of the engine at {self._url}; "
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
        if _populates(spec):
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
            labels = c.get("Labels") or {}
            if self._is_orphan(c, labels, now):
                await self.run(self.remove_container, c["Id"])
                self._mine.pop(labels.get("megaflow.sandbox", ""), None)
                reaped += 1
        if reaped and self.metrics:
            self.metrics.failures.labels(self.name, "reaped").inc(reaped)
        return reaped

    def _failed(self, kind: str) -> None:
        if self.metrics:
            self.metrics.failed(self.name, kind)

    def _is_orphan(self, c: dict[str, Any], labels: dict[str, str], now: float) -> bool:
        if float(labels.get("megaflow.deadline") or "inf") <= now:
            return True
        age = now - float(labels.get("megaflow.created") or now)
        if c.get("State") != "running" and age > self.config.start_timeout_s + 30:
            return True  # its main process died, or it never started
        if labels.get("megaflow.instance") == self.instance:
            return False
        if labels.get("megaflow.host") != self.host:
            return False  # another machine's process: only its deadline tells
        return not _pid_alive(int(labels.get("megaflow.pid") or 0))


__all__ = ["ContainerRuntime", "ContainerSandbox", "engine_urls"]

"""The container engine as the runtime reaches it: one client, two thread pools.

:class:`Engine` finds the Docker-compatible engine (the config's
``base_url``, ``DOCKER_HOST``, then the usual sockets), connects on first
use and runs the SDK's blocking calls off the event loop: short calls on a
control pool, exec output streams on a pool of their own, sized like the
connection pool, so a timeout's kill and other short calls never wait
behind long commands. It also holds the image cache (images resolved once
per engine, a size bound, loading ahead) and knows the engine's CPUs and
memory, which the runtime checks specs against.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

import docker
from docker.errors import DockerException

from megaflow.core.errors import TransportError
from megaflow.environment.config import ContainerRuntimeConfig
from megaflow.environment.container.image_cache import ImageCache
from megaflow.environment.container.images import ImageResolver

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


class Engine:
    def __init__(
        self, config: ContainerRuntimeConfig, image_loaded: Callable[[float], None]
    ) -> None:
        self.config = config
        self.url: str | None = None
        """The engine URL in use, once connected."""
        self.images: ImageCache | None = None
        self._image_loaded = image_loaded
        self._client: docker.DockerClient | None = None
        self._ctl: ThreadPoolExecutor | None = None
        self._streams: ThreadPoolExecutor | None = None
        self._facts: dict[str, Any] | None = None  # the engine's CPUs and memory
        self._podman: bool | None = None

    def client(self) -> docker.DockerClient:
        """The engine client; connects on first use (blocking). Raises ``TransportError``."""
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
            self._client, self.url = c, url
            resolver = ImageResolver(c, self.config.pull, self._image_loaded, self.config.images)
            self.images = ImageCache(resolver, c, self.config.images)
            return c
        raise TransportError(
            f"no container engine answered at {', '.join(engine_urls(self.config.base_url))}; "
            f"{START_HINT}. Errors: {'; '.join(errors)}"
        )

    def facts(self) -> tuple[int, int]:
        """(CPUs, memory bytes) of the engine, 0 where it does not say (blocking, once)."""
        if self._facts is None:
            self._facts = self.client().info()
        return int(self._facts.get("NCPU") or 0), int(self._facts.get("MemTotal") or 0)

    def is_podman(self) -> bool:
        """Whether the engine is Podman (its Docker-compatible API), not Docker (blocking, once)."""
        if self._podman is None:
            parts = self.client().version().get("Components") or []
            self._podman = any("podman" in str(c.get("Name", "")).lower() for c in parts)
        return self._podman

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a short blocking engine call on the control threads."""
        if self._ctl is None:
            self._ctl = ThreadPoolExecutor(16, thread_name_prefix="megaflow-engine")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._ctl, functools.partial(fn, *args, **kwargs))

    async def run_stream(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a blocking output stream read on the stream threads (one per running exec)."""
        if self._streams is None:
            self._streams = ThreadPoolExecutor(
                self.config.max_connections, thread_name_prefix="megaflow-exec"
            )
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._streams, functools.partial(fn, *args, **kwargs))

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        for pool in (self._ctl, self._streams):
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
        self._ctl = self._streams = None

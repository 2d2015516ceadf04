"""Building a task's image from its Dockerfile, through the engine's build API.

Harbor tasks (:mod:`megaflow.datasets.harbor`) describe their image as an
``environment/`` folder with a Dockerfile. :func:`build_images` builds each
one with the container engine (Docker, or Podman's Docker-compatible
service), offline: nothing is pulled, so the Dockerfile must start ``FROM``
an image the engine already holds, and its ``RUN`` steps get no network. An
image is tagged with a hash of its folder's content, so a folder that has
not changed is found by its tag and never built again (a cache hit costs one
inspect).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import docker
from docker.errors import BuildError, DockerException, ImageNotFound

from megaflow.core.errors import InvalidInput, TransportError


@dataclass(frozen=True)
class Built:
    tag: str
    cached: bool
    """The tag was there already: nothing was built."""
    seconds: float


def build_images(
    base_url: str | None, contexts: Iterable[tuple[Path, str]], timeout_s: float = 600
) -> list[Built]:
    """Build each ``(folder, tag)`` not already in the engine at ``base_url`` (None:
    the environment's ``DOCKER_HOST``). A failed build is an :class:`InvalidInput`
    naming the folder with the end of the build log."""
    try:
        client = (
            docker.DockerClient(base_url=base_url, timeout=int(timeout_s))
            if base_url
            else docker.from_env(timeout=int(timeout_s))
        )
        client.ping()
    except DockerException as e:
        where = base_url or "DOCKER_HOST"
        raise TransportError(f"no container engine answered at {where}: {e}") from e
    out: list[Built] = []
    try:
        for context, tag in contexts:
            out.append(_build(client, context, tag))
    finally:
        client.close()
    return out


def _build(client: docker.DockerClient, context: Path, tag: str) -> Built:
    t0 = time.monotonic()
    try:
        client.images.get(tag)
        return Built(tag, True, time.monotonic() - t0)
    except ImageNotFound:
        pass
    try:
        client.images.build(
            path=str(context), tag=tag, rm=True, forcerm=True, pull=False, network_mode="none"
        )
    except BuildError as e:
        log = "".join(str(c.get("stream", c.get("error", ""))) for c in e.build_log)
        why = f"{context}/Dockerfile: the build failed: {e.msg}\n{log[-2000:]}"
        raise InvalidInput(why) from None
    except DockerException as e:
        raise InvalidInput(f"{context}/Dockerfile: the engine refused the build: {e}") from e
    return Built(tag, False, time.monotonic() - t0)

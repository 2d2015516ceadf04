"""Images on demand for the container runtime: present, pulled, or imported.

A spec's ``image`` is either an image name or a root filesystem on this host
(a tarball, e.g. from :func:`megaflow.environment.rootfs.build_busybox_rootfs`,
or a directory). A root filesystem is imported once under a content-addressed
tag, ``localhost/megaflow-rootfs:<sha256 prefix>``, so equal content is imported
once per engine. Each image is resolved once per runtime; how long its first
use took is kept in ``load_seconds``, apart from any sandbox's start time.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import docker
from docker.errors import DockerException, ImageNotFound
from docker.utils import parse_repository_tag

from megaflow.core.errors import SandboxStartError
from megaflow.environment.container.tar import directory_tar
from megaflow.environment.rootfs import file_digest

ROOTFS_REPO = "localhost/megaflow-rootfs"
PullPolicy = Literal["missing", "never", "always"]
LOAD_HINT = (
    "load it into the engine first (`docker load` / `podman load`, or `podman import` of a "
    "root filesystem), or give the path of a root-filesystem tarball as the image"
)


def looks_like_path(image: str) -> bool:
    return image.startswith(("/", "./", "../", "~")) or image.endswith((".tar", ".tar.gz", ".tgz"))


def _imported_id(answer: str, path: Path) -> str:
    """The image id in an import's JSON-lines answer."""
    for line in reversed(answer.strip().splitlines()):
        msg = json.loads(line)
        if "error" in msg:
            raise SandboxStartError(f"root filesystem {str(path)!r} was refused: {msg['error']}")
        for key in ("id", "status"):
            if str(msg.get(key, "")).startswith("sha256:"):
                return str(msg[key])
    raise SandboxStartError(f"importing {str(path)!r} gave no image id: {answer[:300]!r}")


class ImageResolver:
    """Turns a spec's image into a reference the engine can run, once per image."""

    def __init__(
        self,
        client: docker.DockerClient,
        pull: PullPolicy = "missing",
        on_load: Callable[[float], None] | None = None,
    ) -> None:
        self._client = client
        self._on_load = on_load
        self._pull = pull
        self._refs: dict[str, str] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.load_seconds: dict[str, float] = {}

    async def resolve(self, image: str) -> str:
        ref = self._refs.get(image)
        if ref is not None:
            return ref
        lock = self._locks.setdefault(image, asyncio.Lock())
        async with lock:
            if image not in self._refs:
                t0 = time.monotonic()
                self._refs[image] = await asyncio.to_thread(self._resolve, image)
                self.load_seconds[image] = time.monotonic() - t0
                if self._on_load is not None:
                    self._on_load(self.load_seconds[image])
        return self._refs[image]

    def _resolve(self, image: str) -> str:
        if looks_like_path(image) or Path(image).exists():
            return self._import_rootfs(Path(image).expanduser())
        return self._named(image)

    def _named(self, image: str) -> str:
        images = self._client.images
        if self._pull != "always":
            try:
                images.get(image)
                return image
            except ImageNotFound:
                if self._pull == "never":
                    raise SandboxStartError(
                        f"image {image!r} is not in the engine and pulling is off; {LOAD_HINT}"
                    ) from None
            except DockerException as e:
                raise SandboxStartError(f"cannot inspect image {image!r}: {e}") from e
        repo, tag = parse_repository_tag(image)
        try:
            images.pull(repo, tag=tag or "latest")
            images.get(image)
        except DockerException as e:
            raise SandboxStartError(
                f"image {image!r} is not in the engine and pulling it failed ({e}); {LOAD_HINT}"
            ) from e
        return image

    def _import_rootfs(self, path: Path) -> str:
        if not path.exists():
            raise SandboxStartError(
                f"image path {str(path)!r} does not exist; give an existing root-filesystem "
                "tarball or directory, or the name of an image in the engine"
            )
        data: bytes | None = None
        if path.is_dir():
            data = directory_tar(path)
            digest = hashlib.sha256(data).hexdigest()
        else:
            digest = file_digest(path)
        tag = digest[:16]
        ref = f"{ROOTFS_REPO}:{tag}"
        try:
            self._client.images.get(ref)
            return ref
        except ImageNotFound:
            pass
        except DockerException as e:
            raise SandboxStartError(f"cannot inspect image {ref!r}: {e}") from e
        api = self._client.api
        try:  # imported untagged, then tagged: Podman ignores the tag given to import
            answer = (
                api.import_image(src=str(path))
                if data is None
                else api.import_image_from_data(data)
            )
            api.tag(_imported_id(answer, path), ROOTFS_REPO, tag)
            self._client.images.get(ref)
        except DockerException as e:
            raise SandboxStartError(
                f"root filesystem {str(path)!r} could not be imported as an image: {e}; "
                "it must be a tar archive (plain or gzip) of a root filesystem"
            ) from e
        return ref

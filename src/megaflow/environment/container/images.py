"""Images on demand for the container runtime: present, pulled, or imported.

A spec's ``image`` is either an image name or a root filesystem on this host
(a tarball, e.g. from :func:`megaflow.environment.rootfs.build_busybox_rootfs`,
or a directory). A root filesystem is imported once under a content-addressed
tag, ``localhost/megaflow-rootfs:<sha256 prefix>``, so equal content is imported
once per engine. A name missing from the engine is loaded from the archive
folder (``<archive_dir>/<archive_name(image)>``, the engine's image load of a
``docker save`` tarball), else pulled from the registry mirror, else from its
own registry (per ``pull``). Each image is resolved once per runtime until
:meth:`ImageResolver.forget`; how long its load took is kept in
``load_seconds``, apart from any sandbox's start time, and ``origin`` says
which images the resolver brought into the engine (the only ones the cache,
:mod:`megaflow.environment.container.image_cache`, may remove again).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import docker
from docker.errors import DockerException, ImageNotFound
from docker.utils import parse_repository_tag

from megaflow.core.errors import SandboxStartError
from megaflow.environment.config import ImageCacheConfig
from megaflow.environment.container.tar import directory_tar
from megaflow.environment.rootfs import file_digest

ROOTFS_REPO = "localhost/megaflow-rootfs"
PullPolicy = Literal["missing", "never", "always"]
Origin = Literal["archive", "mirror", "pull", "rootfs"]
ARCHIVE_SUFFIXES = (".tar", ".tar.gz")
LOAD_HINT = (
    "load it into the engine first (`docker load` / `podman load`, or `podman import` of a "
    "root filesystem), or give the path of a root-filesystem tarball as the image"
)


def looks_like_path(image: str) -> bool:
    return image.startswith(("/", "./", "../", "~")) or image.endswith((".tar", ".tar.gz", ".tgz"))


def archive_name(image: str) -> str:
    """The archive file name (without suffix) an image is looked up under."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", image)


def mirror_ref(mirror: str, image: str) -> str:
    """Where a registry mirror holds ``image``: its repository path under the mirror
    (the image's own registry host, when it names one, dropped)."""
    repo, tag = parse_repository_tag(image)
    first, _, rest = repo.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        repo = rest
    return f"{mirror.rstrip('/')}/{repo}:{tag or 'latest'}"


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
        sources: ImageCacheConfig | None = None,
    ) -> None:
        self._client = client
        self._on_load = on_load
        self._pull = pull
        cfg = sources or ImageCacheConfig()
        self._archive_dir = Path(cfg.archive_dir).expanduser() if cfg.archive_dir else None
        self._mirror = cfg.mirror
        self._refs: dict[str, str] = {}
        self.locks: dict[str, asyncio.Lock] = {}
        """One lock per image: a load and a removal of the same image never overlap."""
        self.load_seconds: dict[str, float] = {}
        self.origin: dict[str, Origin] = {}
        """How each image the resolver brought into the engine came there."""

    def known(self, image: str) -> str | None:
        """The reference ``image`` resolved to, if it is resolved."""
        return self._refs.get(image)

    async def resolve(self, image: str) -> str:
        ref = self._refs.get(image)
        if ref is not None:
            return ref
        lock = self.locks.setdefault(image, asyncio.Lock())
        async with lock:
            if image not in self._refs:
                t0 = time.monotonic()
                resolved, origin = await asyncio.to_thread(self._resolve, image)
                self._refs[image] = resolved
                if origin is not None:
                    self.origin[image] = origin
                self.load_seconds[image] = time.monotonic() - t0
                if self._on_load is not None:
                    self._on_load(self.load_seconds[image])
        return self._refs[image]

    def forget(self, image: str) -> None:
        """Resolve ``image`` afresh next time (its image was removed from the engine)."""
        self._refs.pop(image, None)
        self.origin.pop(image, None)

    def _resolve(self, image: str) -> tuple[str, Origin | None]:
        if looks_like_path(image) or Path(image).exists():
            return self._import_rootfs(Path(image).expanduser())
        return self._named(image)

    def _present(self, image: str) -> bool:
        try:
            self._client.images.get(image)
            return True
        except ImageNotFound:
            return False
        except DockerException as e:
            raise SandboxStartError(f"cannot inspect image {image!r}: {e}") from e

    def _named(self, image: str) -> tuple[str, Origin | None]:
        if self._pull != "always":
            if self._present(image):
                return image, None
            archive = self._archive(image)
            if archive is not None:
                self._load_archive(image, archive)
                return image, "archive"
        tried = []
        if self._mirror:
            mirrored = mirror_ref(self._mirror, image)
            try:
                self._pull_as(mirrored, image)
                return image, "mirror"
            except DockerException as e:
                tried.append(f"the mirror's {mirrored!r}: {e}")
        if self._pull == "never":
            where = f" ({'; '.join(tried)})" if tried else ""
            raise SandboxStartError(
                f"image {image!r} is not in the engine, not in the archive folder "
                f"{str(self._archive_dir) if self._archive_dir else '(none set)'}, and pulling "
                f"is off{where}; {LOAD_HINT}"
            )
        try:
            self._pull_as(image, image)
        except DockerException as e:
            tried.append(f"its registry: {e}")
            raise SandboxStartError(
                f"image {image!r} is not in the engine and pulling it failed "
                f"({'; '.join(tried)}); {LOAD_HINT}"
            ) from e
        return image, "pull"

    def _archive(self, image: str) -> Path | None:
        if self._archive_dir is None:
            return None
        for suffix in ARCHIVE_SUFFIXES:
            path = self._archive_dir / f"{archive_name(image)}{suffix}"
            if path.is_file():
                return path
        return None

    def _load_archive(self, image: str, path: Path) -> None:
        """The engine's image load of ``path``, tagged ``image`` whatever it was saved as."""
        try:
            with path.open("rb") as f:
                loaded = self._client.images.load(f)
            if not self._present(image):
                if not loaded:
                    raise SandboxStartError(f"image archive {str(path)!r} held no image")
                repo, tag = parse_repository_tag(image)
                loaded[0].tag(repo, tag or "latest")
            self._client.images.get(image)
        except (DockerException, OSError) as e:
            raise SandboxStartError(
                f"image archive {str(path)!r} for {image!r} could not be loaded: {e}; it must "
                "be an image archive as `docker save` / `podman save` write it"
            ) from e

    def _pull_as(self, source: str, image: str) -> None:
        repo, tag = parse_repository_tag(source)
        pulled = self._client.images.pull(repo, tag=tag or "latest")
        if source != image:
            name, tag = parse_repository_tag(image)
            pulled.tag(name, tag or "latest")
        self._client.images.get(image)

    def _import_rootfs(self, path: Path) -> tuple[str, Origin | None]:
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
        if self._present(ref):
            return ref, None
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
        return ref, "rootfs"

"""Root filesystem images for local sandboxes: a content-addressed LRU cache.

A tarball is unpacked once, on first use, into ``<cache>/<sha256>/rootfs``;
every sandbox of that image binds the same directory read-only. The cache
has a size limit: when it is exceeded the least recently used image that no
live sandbox holds is removed. A directory image is used in place.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import threading
import time
from pathlib import Path, PurePosixPath

from megaflow.core.errors import InvalidInput, SandboxStartError

HOST = "host"
_DONE = ".complete"
_USED = ".used"


def _dir_size(path: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


def safe_members(tar: tarfile.TarFile) -> list[tarfile.TarInfo]:
    """Members that stay inside the destination and never write through a link."""
    links: set[str] = set()
    keep = []
    for m in tar.getmembers():
        name = PurePosixPath(os.path.normpath(m.name.lstrip("/") or "."))
        if ".." in name.parts or any(str(p) in links for p in name.parents):
            raise InvalidInput(f"image tarball member {m.name!r} escapes the image root")
        if m.isdev() or m.isfifo():
            continue  # the sandbox gets its own /dev
        if m.islnk() and ".." in PurePosixPath(os.path.normpath(m.linkname)).parts:
            raise InvalidInput(f"image tarball hard link {m.name!r} points outside the image")
        if m.issym():
            links.add(str(name))
        m.name = str(name)
        keep.append(m)
    return keep


class ImageCache:
    """Resolves an image name to a root directory, unpacking tarballs once."""

    def __init__(self, root: Path, max_bytes: int) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self._digests: dict[tuple[str, int, int], str] = {}
        self._in_use: dict[str, int] = {}
        self._lock = threading.Lock()

    def resolve(self, image: str) -> tuple[Path, str | None]:
        """The root directory of ``image`` and its cache key (None if not cached).

        Blocking: call it in a thread. Hold the key with :meth:`release` later.
        """
        if image == HOST:
            return Path("/"), None
        path = Path(image)
        if path.is_dir():
            if not any((path / d).exists() for d in ("bin", "usr")):
                raise InvalidInput(
                    f"image directory {path} has no bin/ or usr/; give a root filesystem"
                )
            return path.resolve(), None
        if path.is_file():
            key = self._digest(path)
            with self._lock:
                self._in_use[key] = self._in_use.get(key, 0) + 1
            try:
                return self._unpacked(path, key), key
            except BaseException:
                self.release(key)
                raise
        raise InvalidInput(
            f"unknown image {image!r}: the local runtime takes 'host', a root filesystem "
            "directory or a tarball path that exists; container image names need the "
            "container runtime"
        )

    def release(self, key: str | None) -> None:
        if key is None:
            return
        with self._lock:
            self._in_use[key] -= 1
            if self._in_use[key] <= 0:
                del self._in_use[key]

    def _digest(self, path: Path) -> str:
        st = path.stat()
        memo = (str(path.resolve()), st.st_size, st.st_mtime_ns)
        if memo not in self._digests:
            h = hashlib.sha256()
            with path.open("rb") as f:
                while chunk := f.read(1 << 20):
                    h.update(chunk)
            self._digests[memo] = h.hexdigest()
        return self._digests[memo]

    def _unpacked(self, tarball: Path, key: str) -> Path:
        entry = self.root / key
        rootfs = entry / "rootfs"
        with self._lock:
            if not (entry / _DONE).exists():
                self._unpack(tarball, entry)
            (entry / _USED).touch()
            self._evict(keep=key)
        return rootfs

    def _unpack(self, tarball: Path, entry: Path) -> None:
        tmp = self.root / f".{entry.name}.{os.getpid()}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(entry, ignore_errors=True)
        try:
            (tmp / "rootfs").mkdir(parents=True)
            with tarfile.open(tarball) as tar:
                tar.extractall(tmp / "rootfs", members=safe_members(tar))
            for path in (tmp, tmp / "rootfs"):  # sandboxes' unprivileged uid must traverse
                path.chmod(path.stat().st_mode | 0o111)
            (tmp / "size").write_text(str(_dir_size(tmp / "rootfs")))
            (tmp / _DONE).touch()
            tmp.rename(entry)
        except tarfile.TarError as e:
            raise SandboxStartError(f"image {tarball} is not a readable tarball: {e}") from e
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def entries(self) -> list[tuple[str, int, float]]:
        """(key, size in bytes, last used) of every cached image, oldest first."""
        out: list[tuple[str, int, float]] = []
        if not self.root.is_dir():
            return out
        for entry in self.root.iterdir():
            if (entry / _DONE).exists():
                size = int((entry / "size").read_text() or 0)
                used = (entry / _USED).stat().st_mtime if (entry / _USED).exists() else 0.0
                out.append((entry.name, size, used))
        return sorted(out, key=lambda e: e[2])

    def _evict(self, keep: str) -> None:
        entries = self.entries()
        total = sum(size for _, size, _ in entries)
        for key, size, _ in entries:
            if total <= self.max_bytes:
                break
            if key == keep or key in self._in_use:
                continue
            doomed = self.root / f".{key}.{time.monotonic_ns()}.evict"
            (self.root / key).rename(doomed)
            shutil.rmtree(doomed, ignore_errors=True)
            total -= size

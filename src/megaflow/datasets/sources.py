"""Turning a repository source into a tar stream for ``Sandbox.upload``.

Every runtime can unpack a tar archive into a sandbox, so this is the one
portable way to place a repository: a directory is packed as it is, a
tarball is repacked without its single top-level directory, and a git bundle
travels as one file that the preparation script fetches from.

Nothing is copied from a source that is over its size cap
(:data:`DEFAULT_MAX_SOURCE_BYTES` unless a run config sets ``max_source_mb``):
:func:`check_source_size` measures a directory while walking it (stopping at
the cap), a tarball by its file size and the sum of its member sizes, and a
bundle by its file size. Symlinks inside a directory are packed as links,
never followed, and special files (devices, fifos, sockets) are left out.
"""

from __future__ import annotations

import io
import lzma
import os
import stat
import tarfile
import zlib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from megaflow.core.errors import InvalidInput, NotFound
from megaflow.datasets.instance import DirSource, GitBundleSource, ImageSource, TarballSource

BUNDLE_NAME = ".megaflow-repo.bundle"
DEFAULT_MAX_SOURCE_MB = 2048
DEFAULT_MAX_SOURCE_BYTES = DEFAULT_MAX_SOURCE_MB * 1024 * 1024
_SKIP_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache"}
_MIB = 1024 * 1024
_READ_ERRORS = (tarfile.TarError, OSError, EOFError, zlib.error, lzma.LZMAError)

Source = DirSource | TarballSource | GitBundleSource | ImageSource


def _too_large(what: str, path: Path, size: int, limit: int, exact: bool = True) -> InvalidInput:
    amount = f"{size} bytes" if exact else f"more than {size} bytes"
    return InvalidInput(
        f"repository {what} {path} holds {amount} ({size / _MIB:.1f} MiB); the cap is "
        f"{limit} bytes ({limit / _MIB:.1f} MiB, max_source_mb)"
    )


def one_file_tar(name: str, data: bytes, mode: int = 0o644) -> bytes:
    """A tar archive holding a single regular file."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size, info.mode = len(data), mode
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _dir_entries(root: Path) -> Iterator[tuple[Path, os.stat_result]]:
    """Every entry under ``root`` to pack, with its ``lstat``; symlinks are not followed."""
    for top, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        for name in sorted([*dirs, *files]):
            path = Path(top) / name
            if path.suffix == ".pyc":
                continue
            st = path.lstat()
            if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode):
                yield path, st


def _dir_size(root: Path, limit: int | None) -> int:
    total = 0
    for _, st in _dir_entries(root):
        if stat.S_ISREG(st.st_mode):
            total += st.st_size
            if limit is not None and total > limit:
                raise _too_large("directory", root, total, limit, exact=False)
    return total


def _dir_tar(root: Path, limit: int | None) -> bytes:
    _dir_size(root, limit)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", dereference=False) as tar:
        for path, _ in sorted(_dir_entries(root), key=lambda e: e[0]):
            tar.add(path, arcname=path.relative_to(root).as_posix(), recursive=False)
    return buf.getvalue()


def _safe(name: str) -> bool:
    p = PurePosixPath(name)
    return not p.is_absolute() and ".." not in p.parts


def _open_tar(src: Path) -> tarfile.TarFile:
    try:
        return tarfile.open(src, mode="r:*")
    except _READ_ERRORS as e:
        raise InvalidInput(f"repository tarball {src} cannot be read: {e}") from None


def _tar_size(src: Path, limit: int | None) -> int:
    size = src.stat().st_size
    if limit is not None and size > limit:
        raise _too_large("tarball", src, size, limit)
    total = 0
    with _open_tar(src) as tin:
        try:
            for m in tin:
                total += m.size if m.isfile() else 0
                if limit is not None and total > limit:
                    raise _too_large("tarball", src, total, limit, exact=False)
        except _READ_ERRORS as e:
            raise InvalidInput(f"repository tarball {src} cannot be read: {e}") from None
    return total


def _strip_tar(src: Path, limit: int | None) -> bytes:
    _tar_size(src, limit)
    with _open_tar(src) as tin:
        members = tin.getmembers()
        tops = {PurePosixPath(m.name).parts[0] for m in members if PurePosixPath(m.name).parts}
        strip = len(tops) == 1 and all(m.isdir() for m in members if m.name.rstrip("/") in tops)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tout:
            for m in members:
                if not _safe(m.name) or ((m.issym() or m.islnk()) and not _safe(m.linkname)):
                    raise InvalidInput(f"repository tarball {src}: unsafe member {m.name!r}")
                if not (m.isfile() or m.isdir() or m.issym() or m.islnk()):
                    continue  # devices and fifos have no place in a repository
                parts = PurePosixPath(m.name).parts
                if strip:
                    parts = parts[1:]
                    if not parts:
                        continue
                m.name = "/".join(parts)
                if m.islnk() and strip:
                    m.linkname = "/".join(PurePosixPath(m.linkname).parts[1:])
                tout.addfile(m, tin.extractfile(m) if m.isfile() else None)
    return buf.getvalue()


def check_source_size(source: Source, limit: int | None = DEFAULT_MAX_SOURCE_BYTES) -> int:
    """The bytes ``source`` would copy; raise ``InvalidInput`` once over ``limit``
    (``None``: no cap), before anything is read into memory. A missing source
    measures 0 here; :func:`source_archive` reports it. An image copies nothing
    from the host: 0."""
    if isinstance(source, ImageSource):
        return 0
    path = Path(source.path)
    if isinstance(source, DirSource):
        return _dir_size(path, limit) if path.is_dir() else 0
    if not path.is_file():
        return 0
    if isinstance(source, TarballSource):
        return _tar_size(path, limit)
    size = path.stat().st_size
    if limit is not None and size > limit:
        raise _too_large("git bundle", path, size, limit)
    return size


def source_archive(source: Source, limit: int | None = DEFAULT_MAX_SOURCE_BYTES) -> bytes:
    """The repository of ``source`` as an uncompressed tar to unpack in the workspace.
    A source over ``limit`` bytes raises ``InvalidInput`` before it is copied."""
    if isinstance(source, ImageSource):
        raise InvalidInput(
            f"the repository of image {source.image!r} is inside the image, not on this host"
        )
    path = Path(source.path)
    if isinstance(source, DirSource):
        if not path.is_dir():
            raise NotFound(f"repository directory {path} does not exist")
        return _dir_tar(path, limit)
    if not path.is_file():
        raise NotFound(f"repository {source.type} {path} does not exist")
    if isinstance(source, TarballSource):
        return _strip_tar(path, limit)
    check_source_size(source, limit)
    return one_file_tar(BUNDLE_NAME, path.read_bytes())

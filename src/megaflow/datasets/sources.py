"""Turning a repository source into a tar stream for ``Sandbox.upload``.

Every runtime can unpack a tar archive into a sandbox, so this is the one
portable way to place a repository: a directory is packed as it is, a
tarball is repacked without its single top-level directory, and a git bundle
travels as one file that the preparation script fetches from.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path, PurePosixPath

from megaflow.core.errors import InvalidInput, NotFound
from megaflow.datasets.instance import DirSource, GitBundleSource, TarballSource

BUNDLE_NAME = ".megaflow-repo.bundle"
_SKIP_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache"}


def one_file_tar(name: str, data: bytes, mode: int = 0o644) -> bytes:
    """A tar archive holding a single regular file."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size, info.mode = len(data), mode
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _dir_tar(root: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(root)
            if _SKIP_DIRS.intersection(rel.parts) or path.suffix == ".pyc":
                continue
            tar.add(path, arcname=rel.as_posix(), recursive=False)
    return buf.getvalue()


def _safe(name: str) -> bool:
    p = PurePosixPath(name)
    return not p.is_absolute() and ".." not in p.parts


def _strip_tar(src: Path) -> bytes:
    try:
        tin = tarfile.open(src, mode="r:*")  # noqa: SIM115 - closed by the with below
    except tarfile.TarError as e:
        raise InvalidInput(f"repository tarball {src} cannot be read: {e}") from None
    with tin:
        members = tin.getmembers()
        tops = {PurePosixPath(m.name).parts[0] for m in members if PurePosixPath(m.name).parts}
        strip = len(tops) == 1 and all(m.isdir() for m in members if m.name.rstrip("/") in tops)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tout:
            for m in members:
                if not _safe(m.name) or ((m.issym() or m.islnk()) and not _safe(m.linkname)):
                    raise InvalidInput(f"repository tarball {src}: unsafe member {m.name!r}")
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


def source_archive(source: DirSource | TarballSource | GitBundleSource) -> bytes:
    """The repository of ``source`` as an uncompressed tar to unpack in the workspace."""
    path = Path(source.path)
    if isinstance(source, DirSource):
        if not path.is_dir():
            raise NotFound(f"repository directory {path} does not exist")
        return _dir_tar(path)
    if not path.is_file():
        raise NotFound(f"repository {source.type} {path} does not exist")
    if isinstance(source, TarballSource):
        return _strip_tar(path)
    return one_file_tar(BUNDLE_NAME, path.read_bytes())

"""Tar archives for the container runtime: the Docker API moves files as tar.

``put_archive`` unpacks a tar into a directory of the container and
``get_archive`` returns one, so files, workspaces and repositories travel as
uncompressed tar streams built and read here, in memory.
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path, PurePosixPath

from megaflow.core.errors import InvalidInput, SandboxStartError


def single_file_tar(name: str, data: bytes, mode: int = 0o644) -> bytes:
    """A tar holding one regular file ``name`` (a relative path)."""
    return files_tar({name: data}, mode)


def files_tar(files: dict[str, bytes], mode: int = 0o644) -> bytes:
    """A tar of regular files, relative path -> bytes; parents are created on unpack."""
    buf = io.BytesIO()
    now = time.time()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in sorted(files.items()):
            rel = PurePosixPath(name)
            if rel.is_absolute() or ".." in rel.parts or not rel.parts:
                raise InvalidInput(f"file path {name!r} must be relative and stay in the workspace")
            info = tarfile.TarInfo(str(rel))
            info.size, info.mode, info.mtime = len(data), mode, now
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def first_file(tar_bytes: bytes, path: str) -> bytes:
    """The content of the single regular file in a ``get_archive`` answer."""
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
        for member in tar:
            if member.isdir():
                raise IsADirectoryError(f"{path!r} is a directory; use download() for directories")
            f = tar.extractfile(member)
            if f is not None:
                return f.read()
    raise InvalidInput(f"{path!r} is not a regular file")


def plain_tar(data: bytes) -> bytes:
    """The same archive without compression (the Docker API wants plain tar)."""
    if data[:2] != b"\x1f\x8b" and data[:3] != b"BZh" and data[:6] != b"\xfd7zXZ\x00":
        return data
    out = io.BytesIO()
    with (
        tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as src,
        tarfile.open(fileobj=out, mode="w") as dst,
    ):
        for member in src:
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
    return out.getvalue()


def directory_tar(root: Path) -> bytes:
    """The content of a host directory as a tar, names relative to ``root``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for entry in sorted(root.iterdir()):
            tar.add(entry, arcname=entry.name)
    return buf.getvalue()


def repo_tar(repo: str) -> bytes:
    """A spec's ``repo`` (host directory, tarball or git bundle) as a plain tar."""
    path = Path(repo).expanduser()
    if path.is_dir():
        return directory_tar(path)
    if not path.is_file():
        raise SandboxStartError(f"repo {repo!r} is neither a directory nor a file on this host")
    if tarfile.is_tarfile(path):
        return plain_tar(path.read_bytes())
    with tempfile.TemporaryDirectory(prefix="megaflow-repo-") as tmp:
        dest = Path(tmp) / "repo"
        try:
            subprocess.run(
                ["git", "clone", "-q", str(path), str(dest)],
                check=True,
                capture_output=True,
                timeout=300,
                env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
            )
        except (OSError, subprocess.SubprocessError) as e:
            detail = getattr(e, "stderr", b"") or b""
            raise SandboxStartError(
                f"repo {repo!r} is not a tarball and git cannot clone it as a bundle: "
                f"{detail.decode(errors='replace').strip() or e}"
            ) from e
        return directory_tar(dest)

"""A local sandbox's writable state on the host, and its snapshot.

``<sandbox dir>/rw`` holds ``ws`` (bound at the workdir), ``tmp`` (``/tmp``)
and ``home`` (``/root``). After setup, ``rw`` is copied to ``snap``; a reset
empties ``rw`` and copies ``snap`` back, so a persistent sandbox starts each
task exactly as it was right after setup. All functions here block: call
them in a worker thread.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path, PurePosixPath

from megaflow.core.errors import InvalidInput, SandboxStartError
from megaflow.environment.local.images import safe_members

RW_PARTS = ("ws", "tmp", "home")


def make_dirs(sandbox_dir: Path) -> Path:
    rw = sandbox_dir / "rw"
    for part in RW_PARTS:
        (rw / part).mkdir(parents=True)
    (rw / "tmp").chmod(0o1777)
    return rw


def place_files(rw: Path, files: dict[str, str]) -> None:
    ws = rw / "ws"
    for rel, text in files.items():
        pure = PurePosixPath(rel)
        if pure.is_absolute() or ".." in pure.parts:
            raise InvalidInput(f"spec file {rel!r} must be a relative path inside the workspace")
        target = ws / pure
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def place_repo(rw: Path, repo: str) -> None:
    """Copy a directory, unpack a tarball, or clone a git bundle into the workspace."""
    src = Path(repo)
    ws = rw / "ws"
    if src.is_dir():
        shutil.copytree(src, ws, symlinks=True, dirs_exist_ok=True)
    elif src.is_file() and src.suffix == ".bundle":
        done = subprocess.run(
            ["git", "clone", "-q", str(src), str(ws)], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise SandboxStartError(f"cannot clone git bundle {src}: {done.stderr.strip()}")
    elif src.is_file() and tarfile.is_tarfile(src):
        with tarfile.open(src) as tar:
            tar.extractall(ws, members=safe_members(tar))
    else:
        raise InvalidInput(
            f"spec repo {repo!r} is not a directory, a tarball or a git bundle (.bundle)"
        )


def _empty(directory: Path) -> None:
    for entry in os.scandir(directory):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)


def is_empty(sandbox_dir: Path) -> bool:
    rw = sandbox_dir / "rw"
    return not any(any(os.scandir(rw / part)) for part in RW_PARTS)


def snapshot(sandbox_dir: Path) -> None:
    """Copy ``rw`` to ``snap``; nothing to copy when it is empty (no snap dir)."""
    snap = sandbox_dir / "snap"
    shutil.rmtree(snap, ignore_errors=True)
    if not is_empty(sandbox_dir):
        shutil.copytree(sandbox_dir / "rw", snap, symlinks=True)


def restore(sandbox_dir: Path) -> None:
    """Put ``rw`` back to the snapshot. The directories themselves stay (they
    are mount points inside the sandbox); only their content is replaced."""
    rw, snap = sandbox_dir / "rw", sandbox_dir / "snap"
    for part in RW_PARTS:
        _empty(rw / part)
        if snap.is_dir():
            shutil.copytree(snap / part, rw / part, symlinks=True, dirs_exist_ok=True)

"""A local sandbox's writable state on the host, and its snapshot.

``<sandbox dir>/rw`` holds ``ws`` (bound at the workdir), ``tmp`` (``/tmp``)
and ``home`` (``/root``). After setup, ``rw`` is copied to ``snap``; a reset
empties ``rw`` and copies ``snap`` back, so a persistent sandbox starts each
task exactly as it was right after setup. All functions here block: call
them in a worker thread.

Everything the sandbox may write belongs to the agent's host uid (``owner``):
the three directories, what the host places in them, and what a restore
copies back (each entry gets the owner it had when the snapshot was taken).
With ``disk_mb`` the three directories live on one tmpfs of that size
mounted at ``rw``, so they are still plain host directories for this code.

What is below the three directories is the sandbox's to write, so the host
reaches it only through :mod:`.safe_tree` (descriptors, never a path that a
planted symlink could redirect): emptying, copying and chowning it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path, PurePosixPath

from megaflow.core.errors import InvalidInput, SandboxStartError
from megaflow.environment.local import safe_tree
from megaflow.environment.local.images import safe_members
from megaflow.environment.local.userns import mount_tmpfs

RW_PARTS = ("ws", "tmp", "home")
PART_MODES = {"ws": 0o755, "tmp": 0o1777, "home": 0o755}


Owner = tuple[int, int]


def make_dirs(sandbox_dir: Path, owner: Owner, disk_bytes: int | None = None) -> Path:
    rw = sandbox_dir / "rw"
    sandbox_dir.mkdir(mode=0o711, parents=True, exist_ok=True)
    sandbox_dir.chmod(0o711)  # bubblewrap (an unprivileged uid) must traverse it
    rw.mkdir(mode=0o711)
    if disk_bytes is not None:
        mount_tmpfs(rw, disk_bytes)
    for part in RW_PARTS:
        (rw / part).mkdir()
        os.chown(rw / part, *owner)
        (rw / part).chmod(PART_MODES[part])
    return rw


def chown_tree(root: Path, owner: Owner) -> None:
    """Give ``root``'s content (not ``root``) to ``owner``; no link is followed."""
    with safe_tree.opened(root) as fd:
        safe_tree.chown_tree(fd, owner)


def place_files(rw: Path, files: dict[str, str], owner: Owner) -> None:
    _place_files(rw, files)
    chown_tree(rw / "ws", owner)


def _place_files(rw: Path, files: dict[str, str]) -> None:
    ws = rw / "ws"
    for rel, text in files.items():
        pure = PurePosixPath(rel)
        if pure.is_absolute() or ".." in pure.parts:
            raise InvalidInput(f"spec file {rel!r} must be a relative path inside the workspace")
        target = ws / pure
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink() or not target.parent.resolve().is_relative_to(ws.resolve()):
            raise InvalidInput(f"spec file {rel!r} would be written through a symlink")
        target.write_text(text)


def place_repo(rw: Path, repo: str, owner: Owner) -> None:
    """Copy a directory, unpack a tarball, or clone a git bundle into the workspace."""
    _place_repo(rw, repo)
    chown_tree(rw / "ws", owner)


def _place_repo(rw: Path, repo: str) -> None:
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


def is_empty(sandbox_dir: Path) -> bool:
    rw = sandbox_dir / "rw"
    return not any(any(os.scandir(rw / part)) for part in RW_PARTS)


def _copy_part(src: Path, dst: Path) -> None:
    """``src``'s content into the empty ``dst``, and its own owner and mode
    onto ``dst``, keeping every entry's owner (as root)."""
    with safe_tree.opened(src) as src_fd, safe_tree.opened(dst) as dst_fd:
        safe_tree.copy_tree(src_fd, dst_fd)
        safe_tree.set_attrs(dst_fd, os.fstat(src_fd), None)


def snapshot(sandbox_dir: Path) -> None:
    """Copy ``rw`` to ``snap``; nothing to copy when it is empty (no snap dir)."""
    snap = sandbox_dir / "snap"
    shutil.rmtree(snap, ignore_errors=True)  # the host's own directory
    if not is_empty(sandbox_dir):
        snap.mkdir(mode=0o700)
        for part in RW_PARTS:
            (snap / part).mkdir(mode=0o700)
            _copy_part(sandbox_dir / "rw" / part, snap / part)


def restore(sandbox_dir: Path) -> None:
    """Put ``rw`` back to the snapshot. The directories themselves stay (they
    are mount points inside the sandbox); their content is removed and copied
    back, their extended attributes removed and their mode put back."""
    rw, snap = sandbox_dir / "rw", sandbox_dir / "snap"
    for part in RW_PARTS:
        with safe_tree.opened(rw / part) as fd:
            safe_tree.clear(fd)
            safe_tree.clear_xattrs(fd)
            if not snap.is_dir():
                os.fchmod(fd, PART_MODES[part])
        if snap.is_dir():
            _copy_part(snap / part, rw / part)

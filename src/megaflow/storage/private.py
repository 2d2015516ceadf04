"""Creating MegaFlow's state on disk for its owner only, whatever the umask.

The state directory (``.megaflow`` by default) holds the metadata database,
artifacts, service logs and the cluster token: every directory MegaFlow creates
there is mode 0700, and the database and log files are 0600. Modes are set
with ``chmod`` after creation, so a permissive (or odd) umask cannot widen them.
Directories that already exist are left as they are.
"""

from __future__ import annotations

import os
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: str | Path) -> Path:
    """Make ``path`` and its missing parents, each one it creates mode 0700."""
    path = Path(path)
    make_private_dirs(os.fspath(path))
    return path


def make_private_dirs(path: str) -> None:
    """:func:`private_dir` on a string path, returning nothing.

    It tries ``mkdir`` first and walks up only when a parent is missing: the
    artifact store calls it for every attempt's new folder, and testing each
    level for existence first cost three system calls more per artifact."""
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:  # there already (or made by someone else meanwhile): left alone
        if not os.path.isdir(path):
            raise NotADirectoryError(f"{path} is not a directory") from None
        return
    except FileNotFoundError:
        parent = os.path.dirname(path.rstrip("/"))
        if not parent or parent == path:
            raise
        make_private_dirs(parent)
        try:
            os.mkdir(path, DIR_MODE)
        except FileExistsError:
            make_private_dirs(path)  # made by someone else meanwhile: checked, not changed
            return
    os.chmod(path, DIR_MODE)


def private_file(path: str | Path, flags: int = os.O_WRONLY | os.O_APPEND) -> int:
    """Open ``path`` with ``flags``, creating it mode 0600 if needed (its folder
    0700); a file MegaFlow creates is never briefly wider. Returns the descriptor."""
    path = Path(path)
    private_dir(path.parent)
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return os.open(path, flags)
    try:
        os.fchmod(fd, FILE_MODE)
    except OSError:
        os.close(fd)
        raise
    return fd


def tighten(path: str | Path) -> None:
    """Set an existing file MegaFlow owns to 0600 (SQLite's -wal and -shm files)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    if st.st_uid == os.getuid() and st.st_mode & 0o077:
        os.chmod(path, FILE_MODE)

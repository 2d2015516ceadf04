"""Host-side work on a tree a sandbox can write, never following its links.

The host (root) empties, copies and chowns the sandbox's writable
directories for resets and snapshots, while whatever ran inside may have
left symlinks there, or (had a process outlived its kill) be swapping a
directory for a link to ``/etc`` or ``/root`` right between a listing and
its use. A path string is resolved again at every call, through whatever
links it then holds; so nothing here takes one below the root. Each root is
opened once from a path the host made itself, and everything beneath is
reached from an open directory, one name at a time, without following
links:

- an entry is opened with ``O_NOFOLLOW`` (``ELOOP`` means it is a symlink)
  and ``O_NONBLOCK`` (a FIFO or a leased file never blocks the host), and
  what it is comes from ``fstat`` of that very descriptor;
- directories are walked through their descriptors (``os.scandir(fd)``,
  ``dir_fd=``), so a directory renamed or replaced meanwhile is still the
  one that was opened, or is not entered at all;
- files are created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` and their owner,
  mode and times set on the descriptor; symlinks are recreated as symlinks
  and changed with ``follow_symlinks=False``, never followed.

Hard links cannot reach outside either: inside the sandbox every writable
directory is its own bind mount, and the kernel refuses links across mounts.
All functions block: call them in a worker thread.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from megaflow.core.errors import SandboxError

Owner = tuple[int, int]
OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
OPEN_ENTRY = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_DEPTH = 256  # deeper trees are refused: each level holds descriptors and a stack frame
_GONE = (errno.ENOENT, errno.ENXIO)  # removed meanwhile; a socket (cannot be opened)


@contextlib.contextmanager
def opened(root: Path) -> Iterator[int]:
    """A descriptor of the directory ``root``, a path the host itself made
    (its last component is not followed either)."""
    fd = os.open(root, OPEN_DIR)
    try:
        yield fd
    finally:
        os.close(fd)


def _names(dir_fd: int) -> list[str]:
    with os.scandir(dir_fd) as it:
        return [entry.name for entry in it]


def _deeper(depth: int) -> int:
    if depth >= MAX_DEPTH:
        raise SandboxError(f"a sandbox directory tree is deeper than {MAX_DEPTH} levels")
    return depth + 1


def _open_entry(dir_fd: int, name: str) -> int | None:
    """``name`` below ``dir_fd``, opened without following it; None for a
    symlink (handle it by name, without following), a socket, or nothing."""
    try:
        return os.open(name, OPEN_ENTRY, dir_fd=dir_fd)
    except OSError as e:
        if e.errno == errno.ELOOP or e.errno in _GONE:
            return None
        raise


def clear(dir_fd: int, depth: int = 0) -> None:
    """Remove everything below ``dir_fd`` (the directory itself stays)."""
    for name in _names(dir_fd):
        for _ in range(8):  # an entry swapped for another kind meanwhile: try again
            try:
                os.unlink(name, dir_fd=dir_fd)  # files, symlinks, FIFOs, sockets
                break
            except FileNotFoundError:
                break
            except IsADirectoryError:
                pass
            try:
                sub = os.open(name, OPEN_DIR, dir_fd=dir_fd)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
                    continue
                raise
            try:
                clear(sub, _deeper(depth))
            finally:
                os.close(sub)
            try:
                os.rmdir(name, dir_fd=dir_fd)
                break
            except FileNotFoundError:
                break
            except OSError as e:  # swapped for a link, or written to meanwhile
                if e.errno not in (errno.ENOTDIR, errno.ENOTEMPTY):
                    raise
        else:
            raise SandboxError(f"cannot remove {name!r}: it keeps changing")


def chown_tree(dir_fd: int, owner: Owner, depth: int = 0) -> None:
    """Give everything below ``dir_fd`` (not the directory itself) to ``owner``."""
    for name in _names(dir_fd):
        fd = _open_entry(dir_fd, name)
        if fd is None:
            with contextlib.suppress(FileNotFoundError):
                os.chown(name, *owner, dir_fd=dir_fd, follow_symlinks=False)
            continue
        try:
            os.fchown(fd, *owner)
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                chown_tree(fd, owner, _deeper(depth))
        finally:
            os.close(fd)


def set_attrs(fd: int, st: os.stat_result, owner: Owner | None) -> None:
    """Owner (``owner``, else ``st``'s when we are root), mode without setuid
    or setgid bits, and times of ``st``, all set on the descriptor ``fd``."""
    if owner is not None or os.geteuid() == 0:
        os.fchown(fd, *(owner or (st.st_uid, st.st_gid)))
    os.fchmod(fd, stat.S_IMODE(st.st_mode) & ~(stat.S_ISUID | stat.S_ISGID))
    os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))


def copy_tree(src_fd: int, dst_fd: int, owner: Owner | None = None, depth: int = 0) -> None:
    """Copy what is below ``src_fd`` into ``dst_fd``: directories, regular
    files, symlinks (as symlinks) and FIFOs, with their modes and times; each
    entry gets ``owner``, or (as root) the owner it has in the source. An
    existing name in the destination is an error: nothing is written through it."""
    for name in _names(src_fd):
        fd = _open_entry(src_fd, name)
        if fd is None:
            _copy_link(src_fd, dst_fd, name, owner)
            continue
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                os.mkdir(name, 0o700, dir_fd=dst_fd)
                sub = os.open(name, OPEN_DIR, dir_fd=dst_fd)
                try:
                    copy_tree(fd, sub, owner, _deeper(depth))
                    set_attrs(sub, st, owner)
                finally:
                    os.close(sub)
            elif stat.S_ISREG(st.st_mode):
                out = os.open(name, CREATE, 0o600, dir_fd=dst_fd)
                try:
                    _copy_data(fd, out, st.st_size)
                    set_attrs(out, st, owner)
                finally:
                    os.close(out)
            elif stat.S_ISFIFO(st.st_mode):
                os.mkfifo(name, 0o600, dir_fd=dst_fd)
                out = os.open(name, OPEN_ENTRY, dir_fd=dst_fd)
                try:
                    set_attrs(out, st, owner)
                finally:
                    os.close(out)
            # devices: the sandbox cannot make them, and they are not copied
        finally:
            os.close(fd)


def _copy_link(src_fd: int, dst_fd: int, name: str, owner: Owner | None) -> None:
    try:
        target = os.readlink(name, dir_fd=src_fd)
        st = os.stat(name, dir_fd=src_fd, follow_symlinks=False)
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.EINVAL):  # gone, or a socket (not a link)
            return
        raise
    if not stat.S_ISLNK(st.st_mode):
        return  # replaced meanwhile: what it is now was not what was read
    os.symlink(target, name, dir_fd=dst_fd)
    if owner is not None or os.geteuid() == 0:
        uid, gid = owner or (st.st_uid, st.st_gid)
        os.chown(name, uid, gid, dir_fd=dst_fd, follow_symlinks=False)
    os.utime(name, ns=(st.st_atime_ns, st.st_mtime_ns), dir_fd=dst_fd, follow_symlinks=False)


def _copy_data(src: int, dst: int, size: int) -> None:
    """At most ``size`` bytes (the size when it was opened: a file that keeps
    growing cannot keep the host copying)."""
    offset = 0
    while offset < size:
        try:
            sent = os.sendfile(dst, src, offset, min(size - offset, 1 << 30))
        except OSError as e:
            if e.errno not in (errno.EINVAL, errno.ENOSYS):
                raise
            data = os.pread(src, min(size - offset, 1 << 20), offset)
            sent = os.write(dst, data) if data else 0
        if sent == 0:
            return
        offset += sent


def clear_xattrs(fd: int) -> None:
    """Remove the extended attributes of ``fd`` (data a task can leave on a
    directory it owns; ``user.*`` ones on tmpfs and most file systems)."""
    try:
        names = os.listxattr(fd)
    except OSError as e:
        if e.errno == errno.ENOTSUP:
            return
        raise
    for name in names:
        with contextlib.suppress(OSError):
            os.removexattr(fd, name)

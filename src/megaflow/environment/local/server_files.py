"""The exec server's file operations for the host, done as the agent.

Third of the exec server's parts (after ``server_jobs`` and
``server_spawner``; see ``server``'s docstring): reading and writing a file, and
unpacking or packing a tar, all with the agent's effective ids
(:class:`AsAgent`), so the host can reach through the server nothing the
agent could not. Standard-library only; the tar module is imported on first
use.
"""

from __future__ import annotations

import errno
import io
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from megaflow.environment.local.server_jobs import AGENT, HEAD_ROOM, MAX_FRAME


class AsAgent:
    """File operations with the agent's effective ids, restored afterwards."""

    def __enter__(self) -> None:
        os.setegid(AGENT)
        os.seteuid(AGENT)

    def __exit__(self, *exc: object) -> None:
        os.seteuid(0)
        os.setegid(0)


def check_members(tar: Any, dest: str) -> None:
    """Refuse members that would land outside ``dest``: absolute or ``..``
    names, links pointing out, anything written through a link of the same
    archive, devices and fifos. (Extraction runs as the agent too.)"""
    links: set[str] = set()
    for m in tar.getmembers():
        name = os.path.normpath(m.name)
        parts = name.split("/")
        parents = {"/".join(parts[:i]) for i in range(1, len(parts))}
        bad = name.startswith(("/", "..")) or m.isdev() or m.isfifo() or parents & links
        if m.issym() or m.islnk():
            base = os.path.dirname(name) if m.issym() else ""
            target = os.path.normpath(os.path.join(base, m.linkname))
            bad = bad or m.linkname.startswith("/") or target.split("/")[0] == ".."
            links.add(name)
        if bad:
            raise ValueError(f"refusing tar member {m.name!r}")
        m.mode &= 0o777


def read_file(path: str) -> bytes:
    with AsAgent(), open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size > MAX_FRAME - HEAD_ROOM:
            raise OSError(errno.EFBIG, "file is larger than the frame limit", path)
        return f.read(MAX_FRAME - HEAD_ROOM + 1)


def write_file(path: str, mode: int, body: bytes) -> None:
    with AsAgent():
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        try:
            view = memoryview(body)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, mode & 0o777)
        finally:
            os.close(fd)


def unpack(dest: str, body: bytes) -> None:
    import tarfile

    with AsAgent(), tarfile.open(fileobj=io.BytesIO(body)) as tar:
        check_members(tar, dest)
        os.makedirs(dest, exist_ok=True)
        tar.extractall(dest)


def pack(path: str) -> bytes:
    import tarfile

    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", path)
    out = io.BytesIO()
    with AsAgent(), tarfile.open(fileobj=out, mode="w") as tar:
        tar.add(path, arcname=os.path.basename(path.rstrip("/")) or ".")
    return out.getvalue()

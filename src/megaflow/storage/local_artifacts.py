"""Artifact store on the local file system: the embedded default.

Writes go to a temporary file in the target directory, are fsynced and then
renamed into place, so a reader never sees a half-written artifact, even
after a crash. A ``.sha256`` sidecar holds the checksum, verified on read.

Every attempt writes at least its trajectory, so the write is on the
rollout's path: it works on string paths with plain ``os`` calls (no
``pathlib``, ``mkstemp`` or buffered file object, which cost as much
Python time and system calls again as the writes themselves), and writes
both temporary files before fsyncing them back to back.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import secrets
from pathlib import Path

from megaflow.core.errors import ArtifactKeyError, ChecksumMismatch, NotFound, StorageError
from megaflow.storage.abstract import ArtifactRef, ArtifactStore
from megaflow.storage.keys import check_key
from megaflow.storage.private import FILE_MODE, make_private_dirs, private_dir

_SUM = ".sha256"
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class LocalArtifactStore(ArtifactStore):
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        self._prefix = os.path.join(str(self.root), "")

    def location(self, key: str) -> str:
        return str(self._path(key))

    async def start(self) -> None:
        private_dir(self.root)  # new folders 0700; files are written 0600

    def _path(self, key: str) -> Path:
        return Path(self._where(key))

    def _where(self, key: str) -> str:
        """The absolute path of ``key``, all links resolved, checked to be in the root."""
        check_key(key)
        if key.endswith(_SUM):
            raise StorageError(f"artifact keys may not end in {_SUM!r}: {key!r}")
        path = os.path.realpath(self._prefix + key)
        if not path.startswith(self._prefix):  # a symlink inside the root pointing out
            raise ArtifactKeyError(f"artifact key {key!r} resolves outside the store")
        return path

    @staticmethod
    def _temp(folder: str) -> tuple[str, int]:
        """A new temporary file in ``folder``, 0600 as ``mkstemp`` makes them: its
        path and a descriptor open for writing."""
        while True:
            tmp = f"{folder}/.tmp-{secrets.token_hex(4)}"
            try:
                return tmp, os.open(tmp, _NEW, FILE_MODE)
            except FileExistsError:
                continue

    def _put(self, key: str, data: bytes) -> ArtifactRef:
        path = self._where(key)
        folder = os.path.dirname(path)
        digest = hashlib.sha256(data).hexdigest()
        temps: list[str] = []
        try:
            make_private_dirs(folder)
            fds: list[int] = []
            try:
                for body in (digest.encode(), data):
                    tmp, fd = self._temp(folder)
                    temps.append(tmp)
                    fds.append(fd)
                    view = memoryview(body)
                    while view:
                        view = view[os.write(fd, view) :]
                for fd in fds:
                    os.fsync(fd)
            finally:
                for fd in fds:
                    os.close(fd)
            # The checksum goes first: a crash between the two leaves an artifact
            # that fails verification instead of one that passes wrongly.
            os.replace(temps[0], path + _SUM)
            os.replace(temps[1], path)
            temps = []
        except OSError as exc:
            raise StorageError(f"cannot write artifact {key!r} under {self.root}: {exc}") from exc
        finally:
            for tmp in temps:  # a write that failed leaves no temporary file behind
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
        return ArtifactRef(key=key, size=len(data), sha256=digest)

    def _get(self, key: str) -> bytes:
        path = self._path(key)
        try:
            data = path.read_bytes()
            expected = path.with_name(path.name + _SUM).read_text().strip()
        except FileNotFoundError:
            raise NotFound(f"artifact {key!r} not found") from None
        if hashlib.sha256(data).hexdigest() != expected:
            raise ChecksumMismatch(f"artifact {key!r} does not match its checksum; it is corrupt")
        return data

    async def put(self, key: str, data: bytes) -> ArtifactRef:
        return await asyncio.to_thread(self._put, key, data)

    async def get(self, key: str) -> bytes:
        return await asyncio.to_thread(self._get, key)

    async def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    async def delete(self, key: str) -> None:
        path = self._path(key)
        path.unlink(missing_ok=True)
        path.with_name(path.name + _SUM).unlink(missing_ok=True)

    async def list(self, prefix: str = "") -> list[str]:
        keys = []
        for p in self.root.rglob("*"):
            if p.is_file() and not p.name.endswith(_SUM) and not p.name.startswith(".tmp-"):
                key = p.relative_to(self.root).as_posix()
                if key.startswith(prefix):
                    keys.append(key)
        return sorted(keys)

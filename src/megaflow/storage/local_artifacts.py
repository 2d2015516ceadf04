"""Artifact store on the local file system: the embedded default.

Writes go to a temporary file in the target directory, are fsynced and then
renamed into place, so a reader never sees a half-written artifact, even
after a crash. A ``.sha256`` sidecar holds the checksum, verified on read.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import tempfile
from pathlib import Path

from megaflow.core.errors import ArtifactKeyError, ChecksumMismatch, NotFound, StorageError
from megaflow.storage.abstract import ArtifactRef, ArtifactStore
from megaflow.storage.keys import check_key
from megaflow.storage.private import private_dir

_SUM = ".sha256"


class LocalArtifactStore(ArtifactStore):
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()

    def location(self, key: str) -> str:
        return str(self._path(key))

    async def start(self) -> None:
        private_dir(self.root)  # new folders 0700; files are written 0600 (mkstemp)

    def _path(self, key: str) -> Path:
        check_key(key)
        if key.endswith(_SUM):
            raise StorageError(f"artifact keys may not end in {_SUM!r}: {key!r}")
        path = (self.root / key).resolve()
        if not path.is_relative_to(self.root):  # a symlink inside the root pointing out
            raise ArtifactKeyError(f"artifact key {key!r} resolves outside the store")
        return path

    def _write_atomic(self, path: Path, data: bytes) -> None:
        private_dir(path.parent)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _put(self, key: str, data: bytes) -> ArtifactRef:
        path = self._path(key)
        digest = hashlib.sha256(data).hexdigest()
        try:
            # The checksum goes first: a crash between the two leaves an
            # artifact that fails verification instead of one that passes wrongly.
            self._write_atomic(path.with_name(path.name + _SUM), digest.encode())
            self._write_atomic(path, data)
        except OSError as exc:
            raise StorageError(f"cannot write artifact {key!r} under {self.root}: {exc}") from exc
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

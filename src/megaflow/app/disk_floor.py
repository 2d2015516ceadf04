"""A full host disk is a fault of the host, not of a task.

:class:`DiskFloor` watches the free space of the local folders a run writes
to (the SQLite database's folder, the local artifact root, the local
sandbox root). While one of them has less free space than
``storage.outage.min_free_mb``, new attempts wait before taking a sandbox
(they are held, not failed), and the run says so once, and again when the
space is back. The executor also asks it whether the host's disk was full
while an attempt ran (a background look every ``poll_s`` remembers when a
folder was last short): then a patch that could not be taken for want of
space, or a sample that did not come out resolved, is an infrastructure
failure and is retried, never a graded sample with reward 0 (a full disk
can break the repository, the agent's edits or the grader's tests, and the
sample would then say nothing about the agent).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import time
from collections.abc import Iterable
from pathlib import Path

from megaflow.core.lifecycle import Lifecycle
from megaflow.storage.config import LocalArtifactsConfig, SqliteMetadataConfig, StorageConfig

log = logging.getLogger(__name__)

_DISK_WORDS = ("no space left", "out of diskspace", "disk quota exceeded", "enospc", "disk is full")


def disk_error(text: str | None) -> bool:
    """Whether an error message speaks of a full disk."""
    low = (text or "").lower()
    return any(w in low for w in _DISK_WORDS)


def storage_folders(storage: StorageConfig) -> list[Path]:
    """The local folders the stores write to: the SQLite database's and the local
    artifact root (none for stores on servers)."""
    folders: list[Path] = []
    md, art = storage.metadata, storage.artifacts
    if isinstance(md, SqliteMetadataConfig) and md.kept():
        folders.append(Path(md.path).parent)
    if isinstance(art, LocalArtifactsConfig):
        folders.append(Path(art.root))
    return folders


def _existing(path: Path) -> Path:
    """``path`` or its nearest existing parent (a folder not made yet is on that disk)."""
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


class DiskFloor(Lifecycle):
    """Started, it looks at the folders every ``poll_s`` and remembers when one was
    last short, so an attempt can ask whether the disk was full while it ran."""

    def __init__(self, folders: Iterable[Path], min_free_mb: int, poll_s: float = 0.5) -> None:
        self.folders = sorted({Path(f) for f in folders})
        self.floor = min_free_mb * 1024 * 1024
        self.poll_s = poll_s
        self.holding = False
        self.held = 0
        """Attempts that had to wait for space, over the run."""
        self.last_short: tuple[float, Path, int] | None = None
        """(monotonic time, folder, free bytes) when a folder was last seen short."""
        self._watch: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self._watch is None and self.floor > 0 and self.folders:
            self._watch = asyncio.get_running_loop().create_task(self._watching())

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
            self._watch = None

    async def _watching(self) -> None:
        while True:
            self.short()
            await asyncio.sleep(self.poll_s)

    def short_since(self, since: float) -> tuple[Path, int] | None:
        """A folder that is short now or was seen short after monotonic ``since``."""
        low = self.short()
        if low is not None:
            return low
        if self.last_short is not None and self.last_short[0] >= since:
            return self.last_short[1], self.last_short[2]
        return None

    def short(self) -> tuple[Path, int] | None:
        """The first folder below the floor and its free bytes, or None."""
        if self.floor <= 0:
            return None
        for folder in self.folders:
            try:
                free = shutil.disk_usage(_existing(folder)).free
            except OSError:
                continue
            if free < self.floor:
                self.last_short = (time.monotonic(), folder, free)
                return folder, free
        return None

    async def room(self, what: str) -> None:
        """Return once every watched folder has room; ``what`` waits meanwhile."""
        low = self.short()
        if low is None:
            return
        self.held += 1
        while low is not None:
            if not self.holding:
                self.holding = True
                folder, free = low
                log.warning(
                    "holding new tasks (%s first): %s has %.1f MB free, below "
                    "storage.outage.min_free_mb (%d MB); they start once space is freed",
                    what, folder, free / 2**20, self.floor // 2**20,
                )  # fmt: skip
            await asyncio.sleep(self.poll_s)
            low = self.short()
        if self.holding:
            self.holding = False
            log.warning("disk space is back above the floor; held tasks start")

"""Whether the process of an embedded run is still alive, on this machine.

``megaflow run`` holds an exclusive ``flock`` on ``locks/<run>.lock`` beside
its SQLite database for as long as it drives the run, and leaves the file
behind when it ends. ``megaflow cancel`` asks the lock: held means the run's
process is alive (it is cancelled with Ctrl-C there), free means it is gone.
The kernel drops the lock when the process dies, also on SIGKILL, so a crash
never leaves a run looking alive. A store on a server (PostgreSQL, MongoDB)
has no such file: there :func:`driver_liveness` reads the run's driver
lease in the store instead.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path

from megaflow.core.errors import AlreadyExists
from megaflow.storage.abstract import MetadataStore
from megaflow.storage.config import MetadataConfig, SqliteMetadataConfig
from megaflow.storage.lease import driver_lease, lease_ended
from megaflow.storage.private import private_file


class Liveness(StrEnum):
    ALIVE = "alive"
    GONE = "gone"
    UNKNOWN = "unknown"
    """No lock file: a server store, or the run was driven from elsewhere."""


def lock_path(metadata: MetadataConfig, run_id: str) -> Path | None:
    """The lock file of ``run_id`` beside a SQLite database; None for other stores."""
    if not isinstance(metadata, SqliteMetadataConfig) or metadata.path == ":memory:":
        return None
    return Path(metadata.path).parent / "locks" / f"{run_id.replace('/', '_')}.lock"


@contextmanager
def hold(path: Path | None) -> Iterator[None]:
    """Hold the run's lock while the block runs (nothing to hold for ``None``)."""
    if path is None:
        yield
        return
    fd = private_file(path, os.O_RDWR)  # 0600 in a 0700 folder, as the store's own files
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise AlreadyExists(f"another process drives this run (it holds {path})") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        os.close(fd)  # closing drops the lock


def liveness(path: Path | None) -> Liveness:
    if path is None or not path.exists():
        return Liveness.UNKNOWN
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return Liveness.ALIVE
    finally:
        os.close(fd)
    return Liveness.GONE


async def driver_liveness(store: MetadataStore, metadata: MetadataConfig, run_id: str) -> Liveness:
    """Whether the driver of ``run_id`` (a job's run or its ``-control`` arm) is alive: a
    SQLite run asked through its lock file, a server store's run through its driver lease
    (:mod:`megaflow.storage.lease`): a lease that ended, or whose holder was a process of
    this host that no longer runs, has no driver. UNKNOWN when neither exists."""
    job = run_id.removesuffix("-control")
    live = liveness(lock_path(metadata, job))
    if live is not Liveness.UNKNOWN:
        return live
    lease = await driver_lease(store, job)  # the job's own, else the cluster scheduler's
    if lease is None:
        return Liveness.UNKNOWN
    return Liveness.GONE if lease_ended(lease) else Liveness.ALIVE

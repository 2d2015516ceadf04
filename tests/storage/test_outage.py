"""Store calls that wait out transient faults: the classification, the
deadline, and retries of writes whose first try committed before its reply
was lost (:mod:`megaflow.storage.outage`, :mod:`megaflow.storage.retrying`)."""

from __future__ import annotations

import asyncio
import errno
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import psycopg
import pytest

from megaflow.core.errors import (
    InvalidTransition,
    MegaFlowTimeout,
    NotFound,
    StorageError,
    StoreUnavailable,
    TransportError,
)
from megaflow.core.states import TaskState
from megaflow.core.tasks import RunSpec, TaskRecord, TaskSpec
from megaflow.storage.abstract import Transition
from megaflow.storage.config import StorageConfig
from megaflow.storage.factory import Stores
from megaflow.storage.outage import Faults, Outage, transient
from megaflow.storage.retrying import RetryingArtifactStore, RetryingMetadataStore
from megaflow.storage.sqlite import SqliteMetadataStore
from megaflow.train.weight_sync.disk import store_uri
from tests.storage.conftest import make_tasks


def _raised_from(cause: BaseException) -> StorageError:
    try:
        raise StorageError("cannot write") from cause
    except StorageError as exc:
        return exc


def test_transient_faults_are_told_from_wrong_calls() -> None:
    full = OSError(errno.ENOSPC, "No space left on device")
    assert transient(full)
    assert transient(_raised_from(full))  # a store's own error, raised from the fault
    assert transient(sqlite3.OperationalError("database or disk is full"))
    assert transient(_raised_from(psycopg.OperationalError("server closed the connection")))
    assert transient(TransportError("cannot reach the S3 endpoint"))
    assert not transient(NotFound("no such task"))
    assert not transient(InvalidTransition("queued -> succeeded"))
    assert not transient(sqlite3.OperationalError("no such table: tasks"))
    assert not transient(MegaFlowTimeout("task deadline passed"))
    assert not transient(_raised_from(OSError(errno.EACCES, "Permission denied")))


class Flaky:
    """Fails with ``exc`` ``n`` times, then answers ``"ok"``."""

    def __init__(self, n: int, exc: Exception) -> None:
        self.n, self.exc, self.calls = n, exc, 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.n:
            raise self.exc
        return "ok"


async def test_a_fault_that_passes_is_waited_out() -> None:
    faults = Faults()
    outage = Outage("metadata", "here", faults, deadline_s=5, base_s=0.01, max_s=0.02)
    op = Flaky(3, ConnectionRefusedError("refused"))
    assert await outage.call("write", op) == "ok"
    assert op.calls == 4
    assert outage.down_since is None  # back
    assert faults.dead is None


async def test_past_the_deadline_the_store_is_given_up_and_then_tried_once_per_call() -> None:
    faults = Faults()
    outage = Outage("artifacts", "s3://b", faults, deadline_s=0.1, base_s=0.02, max_s=0.02)
    waiter = asyncio.ensure_future(faults.wait())
    op = Flaky(10**6, OSError(errno.ENOSPC, "No space left on device"))
    with pytest.raises(StoreUnavailable) as err:
        await outage.call("write artifact 'a'", op)
    assert err.value.store == "artifacts"
    assert "the artifacts store (s3://b)" in str(err.value)
    assert "No space left on device" in str(err.value)
    assert await asyncio.wait_for(waiter, 1) is err.value
    tries = op.calls
    with pytest.raises(StoreUnavailable):  # at once: a stopping run does not wait again
        await outage.call("write artifact 'b'", op)
    assert op.calls == tries + 1
    op.n = 0  # the store is back: the next call revives it
    assert await outage.call("write artifact 'c'", op) == "ok"
    assert outage.dead is None


async def test_a_wrong_call_is_not_retried() -> None:
    outage = Outage("metadata", "here", Faults(), deadline_s=5, base_s=0.01)
    op = Flaky(1, NotFound("no such run"))
    with pytest.raises(NotFound):
        await outage.call("read", op)
    assert op.calls == 1


class LostReplies(SqliteMetadataStore):
    """Commits each write, then loses the reply once (a connection cut after COMMIT)."""

    lost: set[str] = set()

    def _lose(self, what: str) -> None:
        if what not in self.lost:
            self.lost.add(what)
            raise TransportError(f"connection lost after {what}")

    async def add_tasks(self, tasks: Sequence[TaskSpec]) -> list[TaskRecord]:
        records = await super().add_tasks(tasks)
        self._lose("add_tasks")
        return records

    async def transition_many(self, transitions: Sequence[Transition]) -> None:
        await super().transition_many(transitions)
        self._lose("transition_many")


async def test_a_write_whose_reply_was_lost_is_not_refused_on_retry(tmp_path: Path) -> None:
    inner = LostReplies(tmp_path / "m.db")
    inner.lost = set()
    store = RetryingMetadataStore(inner, Outage("metadata", "here", Faults(), deadline_s=5,
                                                base_s=0.01))  # fmt: skip
    async with store:
        await store.create_run(RunSpec(id="r", name="r"))
        tasks = make_tasks("r", 2)
        records = await store.add_tasks(tasks)  # committed, reply lost, retried
        assert [r.id for r in records] == [t.id for t in tasks]
        batch = [Transition(tasks[0].id, TaskState.SCHEDULED),
                 Transition(tasks[0].id, TaskState.STARTING)]  # fmt: skip
        await store.transition_many(batch)  # the retry finds it done: no InvalidTransition
        rec = await store.get_task(tasks[0].id)
        assert (rec.state, rec.attempts) == (TaskState.STARTING, 1)  # counted once
        assert len(await store.list_tasks("r")) == 2
        # a batch that is wrong for real is still refused
        with pytest.raises(InvalidTransition):
            await store.transition_many([Transition(tasks[1].id, TaskState.SUCCEEDED)])


def test_the_artifact_store_still_says_where_its_bytes_live(tmp_path: Path) -> None:
    # the trainer's disk weight sync hands engines a directory or an s3:// URI
    cfg = StorageConfig.model_validate({"artifacts": {"type": "local", "root": str(tmp_path)}})
    store = Stores.from_config(cfg).artifacts
    assert isinstance(store, RetryingArtifactStore)
    assert store_uri(store, "weights/v1") == str(tmp_path / "weights/v1")

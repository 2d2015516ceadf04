"""Writes of finished attempts that a given-up metadata store could not take are
kept in a local spool, in order, and written by the store's next start."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from megaflow.core.errors import StoreUnavailable
from megaflow.core.states import TaskState
from megaflow.core.tasks import Attempt, RunSpec, TaskResult
from megaflow.storage.abstract import Transition
from megaflow.storage.outage import Faults, Outage
from megaflow.storage.retrying import RetryingMetadataStore
from megaflow.storage.spool import Spool
from megaflow.storage.sqlite import SqliteMetadataStore
from tests.storage.conftest import make_tasks

S = TaskState


class Switchable(SqliteMetadataStore):
    """Refuses every write and read while ``down`` (a server that went away)."""

    down = False

    def _check(self) -> None:
        if self.down:
            raise ConnectionRefusedError("connection refused")

    async def transition_many(self, transitions: Sequence[Transition]) -> None:
        self._check()
        await super().transition_many(transitions)

    async def put_attempts(self, attempts: Sequence[Attempt]) -> None:
        self._check()
        await super().put_attempts(attempts)

    async def put_results(self, results: Sequence[TaskResult]) -> None:
        self._check()
        await super().put_results(results)

    async def count_by_state(self, run_id: str | None = None) -> dict[TaskState, int]:
        self._check()
        return await super().count_by_state(run_id)


def wrapped(db: Path, spool_dir: Path) -> tuple[RetryingMetadataStore, Switchable]:
    inner = Switchable(db)
    outage = Outage("metadata", "sqlite", Faults(), deadline_s=0.05, base_s=0.01, max_s=0.01)
    return RetryingMetadataStore(inner, outage, Spool(spool_dir, "sqlite")), inner


async def test_finished_work_is_kept_and_written_by_the_next_start(tmp_path: Path) -> None:
    db, spool_dir = tmp_path / "m.db", tmp_path / "spool"
    store, inner = wrapped(db, spool_dir)
    t0, t1 = make_tasks("r", 2)
    async with store:
        await store.create_run(RunSpec(id="r"))
        await store.add_tasks([t0, t1])
        await store.transition_many([Transition(t.id, S.SCHEDULED) for t in (t0, t1)])
        inner.down = True
        # t0 finishes while the store is away: its writes wait, then are kept
        await store.put_attempts([Attempt(task_id=t0.id, number=1)])
        await store.put_results([TaskResult(task_id=t0.id, success=True, reward=1.0)])
        inner.down = False  # back, but later writes still follow the kept ones
        await store.transition_many(
            [Transition(t0.id, s) for s in (S.STARTING, S.RUNNING, S.GRADING, S.SUCCEEDED)]
        )
        assert (await inner.get_task(t0.id)).state is S.SCHEDULED  # not applied out of order
        inner.down = True
        with pytest.raises(StoreUnavailable):  # reads still fail
            await store.count_by_state("r")
        inner.down = False
    assert len(list(spool_dir.glob("*.jsonl"))) == 1

    again, _ = wrapped(db, spool_dir)
    async with again:  # a resume: the kept writes go in first, in order
        rec = await again.get_task(t0.id)
        assert rec.state is S.SUCCEEDED
        assert rec.attempts == 1
        assert (await again.get_result(t0.id)).reward == 1.0
        assert [a.number for a in await again.list_attempts(t0.id)] == [1]
        assert (await again.get_task(t1.id)).state is S.SCHEDULED  # untouched
    assert not list(spool_dir.glob("*.jsonl"))


async def test_a_spool_of_changes_already_made_is_skipped(tmp_path: Path) -> None:
    db, spool_dir = tmp_path / "m.db", tmp_path / "spool"
    store, _ = wrapped(db, spool_dir)
    (t0,) = make_tasks("r", 1)
    async with store:
        await store.create_run(RunSpec(id="r"))
        await store.add_tasks([t0])
        await store.transition_many([Transition(t0.id, S.SCHEDULED)])
    Spool(spool_dir, "sqlite").transitions(
        [Transition(t0.id, S.SCHEDULED), Transition(t0.id, S.STARTING)]
    )
    again, _ = wrapped(db, spool_dir)
    async with again:
        rec = await again.get_task(t0.id)
    assert (rec.state, rec.attempts) == (S.STARTING, 1)  # the SCHEDULED made earlier: skipped


async def test_a_process_that_goes_on_writes_the_spool_once_the_store_is_back(
    tmp_path: Path,
) -> None:
    store, inner = wrapped(tmp_path / "m.db", tmp_path / "spool")
    assert store.spool is not None
    store.spool.retry_s = 0.0
    (t0,) = make_tasks("r", 1)
    async with store:
        await store.create_run(RunSpec(id="r"))
        await store.add_tasks([t0])
        inner.down = True
        await store.transition_many([Transition(t0.id, S.SCHEDULED)])  # kept
        assert store.spool.active
        await asyncio.sleep(0.01)  # retry_s 0: the next write may try to drain at once
        inner.down = False
        # the next write first writes what was kept, then itself, in order
        await store.transition_many([Transition(t0.id, S.STARTING)])
        rec = await inner.get_task(t0.id)
        assert (rec.state, rec.attempts) == (S.STARTING, 1)
        assert not store.spool.active
        assert not list((tmp_path / "spool").glob("*.jsonl"))


def test_the_default_spool_is_the_users_and_keyed_by_the_databases_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resume from another directory finds the spool of a PostgreSQL or MongoDB run,
    and two projects' relative SQLite paths never share a spool file."""
    from megaflow.storage.config import StorageConfig
    from megaflow.storage.factory import Stores

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))

    def spool_in(cwd: Path, metadata: dict[str, str]) -> Path:
        cwd.mkdir(parents=True, exist_ok=True)
        monkeypatch.chdir(cwd)
        stores = Stores.from_config(StorageConfig.model_validate({"metadata": metadata}))
        spool = stores.metadata.spool  # type: ignore[attr-defined]
        assert isinstance(spool, Spool)
        return spool.path

    pg = {"type": "postgres", "dsn": "postgresql://u@db.example:5432/megaflow"}
    first, other = spool_in(tmp_path / "a", pg), spool_in(tmp_path / "b", pg)
    assert first == other
    assert first.parent == tmp_path / "state" / "megaflow" / "spool"
    sqlite = {"type": "sqlite", "path": ".megaflow/megaflow.db"}
    assert spool_in(tmp_path / "a", sqlite) != spool_in(tmp_path / "b", sqlite)
    explicit = {"metadata": pg, "outage": {"spool_dir": "spool"}}
    monkeypatch.chdir(tmp_path / "a")
    kept = Stores.from_config(StorageConfig.model_validate(explicit)).metadata.spool  # type: ignore[attr-defined]
    assert kept.path.parent == tmp_path / "a" / "spool"  # made absolute when the run starts

import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from megaflow.core.errors import AlreadyExists, InvalidTransition, NotFound, StorageError
from megaflow.core.states import TaskState
from megaflow.core.tasks import Attempt, ErrorKind, RunSpec, TaskResult, TaskSpec
from megaflow.storage.abstract import Transition
from megaflow.storage.sqlite import SqliteMetadataStore
from megaflow.storage.sqlite_schema import MIGRATIONS, SCHEMA_VERSION, migrate
from tests.storage.conftest import make_tasks

S = TaskState


async def test_wal_mode_and_schema_version(store: SqliteMetadataStore) -> None:
    assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.schema_version == SCHEMA_VERSION == len(MIGRATIONS)


async def test_migrates_an_old_database(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, target=1)
    conn.execute("INSERT INTO runs VALUES ('r', 'n', 1.0, ?)", (RunSpec(id="r").model_dump_json(),))
    conn.close()
    async with SqliteMetadataStore(path) as s:
        assert s.schema_version == SCHEMA_VERSION
        assert (await s.get_run("r")).id == "r"
        indexes = {r[0] for r in s.conn.execute("SELECT name FROM sqlite_master")}
        assert "tasks_state_seq" in indexes


async def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StorageError, match="newer than this MegaFlow"):
        await SqliteMetadataStore(path).start()


async def test_runs_round_trip(store: SqliteMetadataStore) -> None:
    assert [r.id for r in await store.list_runs()] == ["r1"]
    with pytest.raises(AlreadyExists):
        await store.create_run(RunSpec(id="r1"))
    with pytest.raises(NotFound):
        await store.get_run("nope")


async def test_tasks_round_trip_and_queries(store: SqliteMetadataStore) -> None:
    await store.create_run(RunSpec(id="r2"))
    recs = await store.add_tasks(make_tasks("r1", 5) + make_tasks("r2", 3))
    assert [r.seq for r in recs] == list(range(1, 9))
    got = await store.get_task("r1/t3")
    assert got.spec == recs[3].spec
    assert got.state is S.QUEUED
    await store.transition_many(
        [Transition("r1/t0", S.SCHEDULED), Transition("r2/t1", S.SCHEDULED)]
    )
    assert [r.id for r in await store.list_tasks("r1", [S.QUEUED])] == [
        f"r1/t{i}" for i in (1, 2, 3, 4)
    ]
    assert [r.id for r in await store.list_tasks(states=[S.SCHEDULED])] == ["r1/t0", "r2/t1"]
    assert await store.count_by_state("r1") == {S.QUEUED: 4, S.SCHEDULED: 1}
    assert await store.count_by_state() == {S.QUEUED: 6, S.SCHEDULED: 2}
    assert len(await store.list_tasks(limit=3)) == 3
    assert await store.list_tasks(states=[]) == []


async def test_duplicate_task_ids_insert_nothing(store: SqliteMetadataStore) -> None:
    await store.add_tasks(make_tasks("r1", 2))
    with pytest.raises(AlreadyExists, match="r1/t0"):
        await store.add_tasks(make_tasks("r1", 3, prefix="u") + make_tasks("r1", 2))
    assert len(await store.list_tasks("r1")) == 2
    with pytest.raises(AlreadyExists, match="twice"):
        await store.add_tasks([TaskSpec(id="x", run_id="r1"), TaskSpec(id="x", run_id="r1")])


async def test_transitions_enforce_the_state_machine(store: SqliteMetadataStore) -> None:
    await store.add_tasks(make_tasks("r1", 2))
    rec = await store.transition("r1/t0", S.SCHEDULED)
    assert (rec.state, rec.attempts) == (S.SCHEDULED, 1)
    with pytest.raises(InvalidTransition):
        await store.transition("r1/t0", S.SUCCEEDED)
    with pytest.raises(InvalidTransition, match="expected state queued"):
        await store.transition("r1/t0", S.STARTING, expect=S.QUEUED)
    for st_ in (S.STARTING, S.RUNNING, S.PREEMPTED, S.QUEUED, S.SCHEDULED):
        rec = await store.transition("r1/t0", st_)
    assert (rec.attempts, rec.preemptions) == (2, 1)
    with pytest.raises(NotFound):
        await store.transition("r1/zzz", S.SCHEDULED)


async def test_a_bad_transition_leaves_the_whole_batch_unapplied(
    store: SqliteMetadataStore,
) -> None:
    await store.add_tasks(make_tasks("r1", 3))
    batch = [Transition("r1/t0", S.SCHEDULED), Transition("r1/t1", S.SCHEDULED),
             Transition("r1/t2", S.GRADING)]  # fmt: skip
    with pytest.raises(InvalidTransition):
        await store.transition_many(batch)
    assert await store.count_by_state("r1") == {S.QUEUED: 3}


async def test_batch_applies_in_order(store: SqliteMetadataStore) -> None:
    await store.add_tasks(make_tasks("r1", 1))
    chain = [S.SCHEDULED, S.STARTING, S.RUNNING, S.GRADING, S.SUCCEEDED]
    await store.transition_many([Transition("r1/t0", s) for s in chain])
    assert (await store.get_task("r1/t0")).state is S.SUCCEEDED


async def test_attempts_and_results(store: SqliteMetadataStore) -> None:
    await store.add_tasks(make_tasks("r1", 2))
    a1 = Attempt(task_id="r1/t0", number=1, error_kind=ErrorKind.INFRA, error="boom")
    await store.put_attempt(a1)
    await store.put_attempt(Attempt(task_id="r1/t0", number=2))
    assert [a.number for a in await store.list_attempts("r1/t0")] == [1, 2]
    assert (await store.list_attempts("r1/t0"))[0] == a1
    res = TaskResult(task_id="r1/t1", success=True, reward=1.0, metrics={"steps": 3},
                     artifacts={"trajectory": "r1/t1/traj.json"})  # fmt: skip
    await store.put_result(res)
    await store.put_result(TaskResult(task_id="r1/t0", error_kind=ErrorKind.AGENT))
    assert await store.get_result("r1/t1") == res
    assert [r.task_id for r in await store.list_results("r1")] == ["r1/t0", "r1/t1"]
    with pytest.raises(NotFound):
        await store.get_result("nope")
    with pytest.raises(NotFound):
        await store.put_result(TaskResult(task_id="nope"))


async def test_store_must_be_started(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="not started"):
        await SqliteMetadataStore(tmp_path / "x.db").list_runs()


task_specs = st.builds(
    TaskSpec,
    id=st.from_regex(r"[a-z0-9][a-z0-9._-]{0,20}", fullmatch=True).filter(lambda s: ".." not in s),
    run_id=st.just("r1"),
    priority=st.integers(-1000, 1000),
    max_attempts=st.integers(1, 5),
    payload=st.dictionaries(st.text(max_size=5), st.one_of(st.integers(), st.text(max_size=20))),
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(specs=st.lists(task_specs, max_size=10, unique_by=lambda t: t.id))
async def test_property_tasks_round_trip(tmp_path: Path, specs: list[TaskSpec]) -> None:
    async with SqliteMetadataStore(":memory:") as s:
        await s.create_run(RunSpec(id="r1"))
        await s.add_tasks(specs)
        got = await s.list_tasks("r1")
        assert [r.spec for r in got] == specs

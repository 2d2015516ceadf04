"""One contract for every MetadataStore: SQLite, PostgreSQL, MongoDB and in memory.

The server backends run against real servers started by
``tests/fixtures/sql_servers.py``; each test gets its own empty PostgreSQL
schema or MongoDB database.
"""

import asyncio
import itertools
from collections.abc import AsyncIterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from megaflow.core.errors import AlreadyExists, InvalidTransition, NotFound, StorageError
from megaflow.core.states import TaskState
from megaflow.core.tasks import Attempt, ErrorKind, RunSpec, TaskResult, TaskSpec
from megaflow.storage.abstract import MetadataStore, Transition
from tests.storage.conftest import Backend, make_tasks

S = TaskState


@pytest.fixture
async def store(backend: Backend) -> AsyncIterator[MetadataStore]:
    async with backend.open() as s:
        await s.create_run(RunSpec(id="r1", name="one"))
        yield s


async def test_runs_round_trip(store: MetadataStore) -> None:
    assert [r.id for r in await store.list_runs()] == ["r1"]
    with pytest.raises(AlreadyExists):
        await store.create_run(RunSpec(id="r1"))
    with pytest.raises(NotFound):
        await store.get_run("nope")


async def test_tasks_round_trip_and_queries(store: MetadataStore) -> None:
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


async def test_duplicate_task_ids_insert_nothing(store: MetadataStore) -> None:
    await store.add_tasks(make_tasks("r1", 2))
    with pytest.raises(AlreadyExists, match="r1/t0"):
        await store.add_tasks(make_tasks("r1", 3, prefix="u") + make_tasks("r1", 2))
    assert len(await store.list_tasks("r1")) == 2
    with pytest.raises(AlreadyExists, match="twice"):
        await store.add_tasks([TaskSpec(id="x", run_id="r1"), TaskSpec(id="x", run_id="r1")])
    later = await store.add_tasks(make_tasks("r1", 1, prefix="v"))
    assert [r.id for r in await store.list_tasks("r1")] == ["r1/t0", "r1/t1", "r1/v0"]
    assert later[0].seq == (await store.list_tasks("r1"))[-1].seq


async def test_transitions_enforce_the_state_machine(store: MetadataStore) -> None:
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


async def test_a_bad_transition_leaves_the_whole_batch_unapplied(store: MetadataStore) -> None:
    await store.add_tasks(make_tasks("r1", 3))
    batch = [Transition("r1/t0", S.SCHEDULED), Transition("r1/t1", S.SCHEDULED),
             Transition("r1/t2", S.GRADING)]  # fmt: skip
    with pytest.raises(InvalidTransition):
        await store.transition_many(batch)
    assert await store.count_by_state("r1") == {S.QUEUED: 3}
    with pytest.raises(NotFound):
        await store.transition_many([Transition("r1/t0", S.SCHEDULED), Transition("x", S.FAILED)])
    assert (await store.get_task("r1/t0")).attempts == 0


async def test_batch_applies_in_order(store: MetadataStore) -> None:
    await store.add_tasks(make_tasks("r1", 1))
    chain = [S.SCHEDULED, S.STARTING, S.RUNNING, S.GRADING, S.SUCCEEDED]
    await store.transition_many([Transition("r1/t0", s) for s in chain])
    assert (await store.get_task("r1/t0")).state is S.SUCCEEDED


async def test_batch_counts_and_errors_like_single_steps(store: MetadataStore) -> None:
    await store.add_tasks(make_tasks("r1", 2))
    loop = [S.SCHEDULED, S.STARTING, S.PREEMPTED, S.QUEUED, S.SCHEDULED, S.RETRYING]
    await store.transition_many(
        [Transition("r1/t0", s, error="lost" if s is S.RETRYING else None) for s in loop]
        + [Transition("r1/t1", S.SCHEDULED, expect=S.QUEUED, error="first")]
    )
    t0, t1 = await store.get_task("r1/t0"), await store.get_task("r1/t1")
    assert (t0.state, t0.attempts, t0.preemptions, t0.error) == (S.RETRYING, 2, 1, "lost")
    assert (t1.state, t1.attempts, t1.error) == (S.SCHEDULED, 1, "first")
    t1 = await store.transition("r1/t1", S.STARTING)
    assert t1.error == "first"  # a transition without an error keeps the stored one


async def test_attempts_and_results(store: MetadataStore) -> None:
    await store.add_tasks(make_tasks("r1", 2))
    a1 = Attempt(task_id="r1/t0", number=1, error_kind=ErrorKind.INFRA, error="boom")
    await store.put_attempt(a1)
    await store.put_attempt(Attempt(task_id="r1/t0", number=2))
    assert [a.number for a in await store.list_attempts("r1/t0")] == [1, 2]
    assert (await store.list_attempts("r1/t0"))[0] == a1
    a2 = Attempt(task_id="r1/t0", number=2, sandbox="sb-1")
    await store.put_attempt(a2)
    assert (await store.list_attempts("r1/t0"))[1] == a2
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


async def test_batched_attempts_and_results(store: MetadataStore) -> None:
    await store.add_tasks(make_tasks("r1", 3))
    attempts = [Attempt(task_id=f"r1/t{i}", number=n) for i in range(3) for n in (1, 2)]
    await store.put_attempts(attempts)
    await store.put_attempts([Attempt(task_id="r1/t0", number=2, error="again")])
    assert [a.number for a in await store.list_attempts("r1/t1")] == [1, 2]
    assert (await store.list_attempts("r1/t0"))[1].error == "again"
    results = [TaskResult(task_id=f"r1/t{i}", success=i % 2 == 0, reward=i / 2) for i in range(3)]
    await store.put_results(results)
    assert await store.list_results("r1") == results
    await store.put_attempts([])
    await store.put_results([])
    with pytest.raises(NotFound):
        await store.put_results([TaskResult(task_id="r1/t0"), TaskResult(task_id="nope")])


async def test_store_must_be_started(backend: Backend) -> None:
    with pytest.raises(StorageError, match="not started"):
        await backend.open().list_runs()


async def test_concurrent_schedulers_never_lose_an_update(backend: Backend) -> None:
    """Two stores on one database race to claim the same tasks: each task is
    claimed once, and its attempt counter says so."""
    async with backend.open() as a, backend.open() as b:
        await a.create_run(RunSpec(id="r1"))
        await a.add_tasks(make_tasks("r1", 12))
        ids = [f"r1/t{i}" for i in range(12)]

        async def claim(s: MetadataStore, task_id: str) -> bool:
            try:
                await s.transition(task_id, S.SCHEDULED, expect=S.QUEUED)
            except InvalidTransition:
                return False
            return True

        async def claim_batch(s: MetadataStore, batch: list[str]) -> bool:
            try:
                await s.transition_many([Transition(i, S.SCHEDULED) for i in batch])
            except InvalidTransition:
                return False
            return True

        wins = await asyncio.gather(*(claim(s, i) for i in ids[:6] for s in (a, b, a, b)))
        assert sum(wins) == 6
        batches = [ids[6:], ids[:5:-1], ids[9:]]
        won = await asyncio.gather(
            claim_batch(a, batches[0]), claim_batch(b, batches[1]), claim_batch(a, batches[2])
        )
        assert sum(won) >= 1
        claimed = set(ids[:6]).union(*(b_ for b_, w in zip(batches, won, strict=True) if w))
        expected = [(S.SCHEDULED, 1) if i in claimed else (S.QUEUED, 0) for i in ids]
        for s in (a, b):
            assert [(r.state, r.attempts) for r in await s.list_tasks("r1")] == expected


task_specs = st.builds(
    TaskSpec,
    id=st.from_regex(r"[a-z0-9][a-z0-9._-]{0,20}", fullmatch=True).filter(lambda s: ".." not in s),
    run_id=st.just("r1"),
    priority=st.integers(-1000, 1000),
    max_attempts=st.integers(1, 5),
    payload=st.dictionaries(st.text(max_size=5), st.one_of(st.integers(), st.text(max_size=20))),
)
_runs = itertools.count()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(specs=st.lists(task_specs, max_size=10, unique_by=lambda t: t.id))
async def test_property_tasks_round_trip(store: MetadataStore, specs: list[TaskSpec]) -> None:
    # One store serves every example, so each example gets a run of its own.
    run = f"p{next(_runs)}"
    await store.create_run(RunSpec(id=run))
    specs = [s.model_copy(update={"id": f"{run}/{s.id}", "run_id": run}) for s in specs]
    await store.add_tasks(specs)
    got = await store.list_tasks(run)
    assert [r.spec for r in got] == specs

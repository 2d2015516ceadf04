"""The TaskQueue contract, run against every implementation."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from megaflow.core.tasks import TaskSpec
from megaflow.storage import redis_client
from megaflow.storage.abstract import QueuedTask, TaskQueue
from megaflow.storage.memory_queue import MemoryTaskQueue
from megaflow.storage.redis_queue import RedisTaskQueue

NewQueue = Callable[[], Awaitable[TaskQueue]]
BACKENDS = [
    "memory",
    pytest.param("redis", marks=pytest.mark.services),
    pytest.param("redis-cluster", marks=pytest.mark.services),
]


def item(i: int, priority: int) -> QueuedTask:
    return QueuedTask(spec=TaskSpec(id=f"t{i}", run_id="r", priority=priority), seq=i)


@pytest.fixture(params=BACKENDS)
async def new_queue(request: pytest.FixtureRequest) -> AsyncIterator[NewQueue]:
    """A factory of fresh, started, empty queues of one backend. Redis queues
    share one client and differ by namespace, as tenants of one server do."""
    opened: list[TaskQueue] = []
    client = None
    if request.param != "memory":
        cluster = request.param == "redis-cluster"
        url = request.getfixturevalue("redis_cluster" if cluster else "redis_server")
        client = redis_client.connect(url, cluster=cluster)

    async def make() -> TaskQueue:
        q: TaskQueue
        if client is None:
            q = MemoryTaskQueue()
        else:
            q = RedisTaskQueue(namespace=f"test-{uuid.uuid4().hex[:12]}", client=client)
        await q.start()
        opened.append(q)
        return q

    yield make
    for q in opened:
        await q.stop()
    if client is not None:
        await redis_client.close(client)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(prios=st.lists(st.integers(-5, 5), max_size=60), removed=st.sets(st.integers(0, 59)))
async def test_pops_by_priority_then_arrival(
    new_queue: NewQueue, prios: list[int], removed: set[int]
) -> None:
    q = await new_queue()
    await q.push([item(i, p) for i, p in enumerate(prios)])
    found = await q.remove(f"t{i}" for i in removed)
    assert found == len([i for i in removed if i < len(prios)])
    expected = sorted(((-p, i) for i, p in enumerate(prios) if i not in removed))
    got = []
    while await q.size():
        (it,) = await q.pop()
        got.append((-it.spec.priority, it.seq))
    assert got == expected
    assert await q.pop() == []


async def test_pop_many_takes_across_priorities(new_queue: NewQueue) -> None:
    q = await new_queue()
    await q.push([item(i, i % 3) for i in range(9)])
    first = await q.pop(4)
    assert [i.task_id for i in first] == ["t2", "t5", "t8", "t1"]
    assert await q.size() == 5
    rest = await q.pop(100)
    assert [i.task_id for i in rest] == ["t4", "t7", "t0", "t3", "t6"]
    assert await q.pop(3) == []


async def test_push_twice_queues_once_and_peek_does_not_consume(new_queue: NewQueue) -> None:
    q = await new_queue()
    await q.push([item(1, 0), item(1, 0), item(2, 5)])
    assert await q.size() == 2
    assert [i.task_id for i in await q.peek(5)] == ["t2", "t1"]
    assert [i.task_id for i in await q.peek()] == ["t2"]
    assert [i.task_id for i in await q.pop(5)] == ["t2", "t1"]
    assert await q.size() == 0
    assert await q.peek() == []


async def test_removed_then_pushed_again_is_queued(new_queue: NewQueue) -> None:
    q = await new_queue()
    await q.push([item(1, 0)])
    await q.remove(["t1"])
    await q.push([item(1, 3)])
    (it,) = await q.pop()
    assert it.spec.priority == 3
    assert await q.pop() == []


async def test_entries_keep_their_spec_and_seq(new_queue: NewQueue) -> None:
    q = await new_queue()
    spec = TaskSpec(id="r/x", run_id="r", priority=-7, payload={"k": [1, "two"]})
    await q.push([QueuedTask(spec=spec, seq=42)])
    (it,) = await q.pop()
    assert it.spec == spec
    assert it.seq == 42
    assert await q.ack(["r/x"]) in (0, 1)  # acknowledging is always allowed
    assert await q.remove(["r/x", "missing"]) == 0
    assert await q.size() == 0

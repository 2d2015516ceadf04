"""The EventBus contract, run against every implementation."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest

from megaflow.core.events import CapacityFreed, TaskFinished, TaskSubmitted
from megaflow.core.states import TaskState
from megaflow.storage.abstract import EventBus
from megaflow.storage.memory_bus import MemoryEventBus
from megaflow.storage.redis_bus import RedisEventBus

BACKENDS = [
    "memory",
    pytest.param("redis", marks=pytest.mark.services),
    pytest.param("redis-cluster", marks=pytest.mark.services),
]


@pytest.fixture(params=BACKENDS)
async def bus(request: pytest.FixtureRequest) -> AsyncIterator[EventBus]:
    b: EventBus
    if request.param == "memory":
        b = MemoryEventBus()
    else:
        cluster = request.param == "redis-cluster"
        url = request.getfixturevalue("redis_cluster" if cluster else "redis_server")
        b = RedisEventBus(url, cluster=cluster, namespace=f"test-{uuid.uuid4().hex[:12]}")
    await b.start()
    yield b
    await b.stop()


async def test_delivers_by_kind(bus: EventBus) -> None:
    all_sub = await bus.subscribe()
    cap_sub = await bus.subscribe(["capacity_freed"])
    await bus.publish(TaskSubmitted(run_id="r", task_ids=["a"]))
    await bus.publish(CapacityFreed(instance="i"))
    assert (await all_sub.get(1)).kind == "task_submitted"
    assert (await all_sub.get(1)).kind == "capacity_freed"
    assert (await cap_sub.get(1)).kind == "capacity_freed"
    with pytest.raises(TimeoutError):
        await cap_sub.get(0.05)


async def test_events_round_trip_intact(bus: EventBus) -> None:
    sub = await bus.subscribe()
    sent = TaskFinished(run_id="r", task_id="r/t", state=TaskState.SUCCEEDED, reward=0.5)
    await bus.publish(sent)
    assert await sub.get(1) == sent


async def test_bounded_buffer_loses_nothing(bus: EventBus) -> None:
    sub = await bus.subscribe(maxsize=2)
    buffered = sub.queue  # type: ignore[attr-defined]

    async def publish_all() -> None:
        for i in range(20):
            await bus.publish(CapacityFreed(instance=f"i{i}"))

    publisher = asyncio.create_task(publish_all())
    got = []
    for _ in range(20):
        got.append(await sub.get(2))
        assert buffered.qsize() <= 2  # the buffer never outgrows its bound
    await asyncio.wait_for(publisher, 2)
    assert [e.instance for e in got] == [f"i{i}" for i in range(20)]  # type: ignore[union-attr]


async def test_closed_subscription_stops_iteration_and_receiving(bus: EventBus) -> None:
    sub = await bus.subscribe()
    await bus.publish(CapacityFreed(instance="a"))
    await sub.close()
    await bus.publish(CapacityFreed(instance="b"))
    seen = [e async for e in sub]
    assert [e.instance for e in seen] == ["a"]  # type: ignore[union-attr]
    with pytest.raises(ValueError):
        await bus.subscribe(maxsize=0)


async def test_subscribers_see_only_later_events(bus: EventBus) -> None:
    await bus.publish(CapacityFreed(instance="before"))
    sub = await bus.subscribe()
    await bus.publish(CapacityFreed(instance="after"))
    assert (await sub.get(1)).instance == "after"  # type: ignore[union-attr]
    with pytest.raises(TimeoutError):
        await sub.get(0.05)

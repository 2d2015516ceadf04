import asyncio

import pytest

from megaflow.core.events import CapacityFreed, TaskSubmitted
from megaflow.storage.memory_bus import MemoryEventBus


async def test_delivers_by_kind() -> None:
    bus = MemoryEventBus()
    all_sub = await bus.subscribe()
    cap_sub = await bus.subscribe(["capacity_freed"])
    await bus.publish(TaskSubmitted(run_id="r", task_ids=["a"]))
    await bus.publish(CapacityFreed(instance="i"))
    assert (await all_sub.get(1)).kind == "task_submitted"
    assert (await all_sub.get(1)).kind == "capacity_freed"
    assert (await cap_sub.get(1)).kind == "capacity_freed"
    with pytest.raises(TimeoutError):
        await cap_sub.get(0.05)
    await bus.stop()


async def test_full_buffer_applies_backpressure() -> None:
    bus = MemoryEventBus()
    sub = await bus.subscribe(maxsize=2)
    for _ in range(2):
        await bus.publish(CapacityFreed(instance="i"))
    blocked = asyncio.create_task(bus.publish(CapacityFreed(instance="late")))
    await asyncio.sleep(0.05)
    assert not blocked.done()  # the publisher waits: the buffer does not grow
    assert sub.queue.qsize() == 2
    await sub.get(1)
    await asyncio.wait_for(blocked, 1)
    assert sub.queue.qsize() == 2


async def test_drop_oldest_never_blocks_and_counts_losses() -> None:
    bus = MemoryEventBus()
    sub = await bus.subscribe(maxsize=3, overflow="drop_oldest")
    for i in range(10):
        await bus.publish(CapacityFreed(instance=f"i{i}"))
    assert sub.dropped == 7
    got = [await sub.get(1) for _ in range(3)]
    assert [e.instance for e in got] == ["i7", "i8", "i9"]  # type: ignore[union-attr]


async def test_closed_subscription_stops_iteration_and_receiving() -> None:
    bus = MemoryEventBus()
    sub = await bus.subscribe()
    await bus.publish(CapacityFreed(instance="a"))
    await sub.close()
    await bus.publish(CapacityFreed(instance="b"))
    seen = [e async for e in sub]
    assert [e.instance for e in seen] == ["a"]  # type: ignore[union-attr]
    with pytest.raises(ValueError):
        await bus.subscribe(maxsize=0)

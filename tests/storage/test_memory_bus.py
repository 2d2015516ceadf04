"""In-process bus specifics; the shared behaviour is in test_bus_contract.py."""

import asyncio

from megaflow.core.events import CapacityFreed
from megaflow.storage.memory_bus import MemoryEventBus


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


async def test_listens_follows_the_subscriptions() -> None:
    bus = MemoryEventBus()
    assert not bus.listens("capacity_freed")
    some = await bus.subscribe(["capacity_freed"])
    assert bus.listens("capacity_freed")
    assert not bus.listens("task_finished")
    every = await bus.subscribe()
    assert bus.listens("task_finished")
    await every.close()
    assert not bus.listens("task_finished")
    await some.close()
    assert not bus.listens("capacity_freed")

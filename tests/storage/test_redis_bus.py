"""Redis bus specifics on real servers: backlog kept in Redis, several
processes on one stream, consumer-group cleanup, a server restart."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from megaflow.core.events import CapacityFreed
from megaflow.storage.redis_bus import RedisEventBus, RedisSubscription
from tests.fixtures.servers import free_port, start_redis, stop

pytestmark = pytest.mark.services


async def eventually(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


@pytest.fixture
async def bus(redis_server: str) -> AsyncIterator[RedisEventBus]:
    b = RedisEventBus(redis_server, namespace=f"test-{uuid.uuid4().hex[:12]}")
    await b.start()
    yield b
    await b.stop()


async def test_a_slow_subscribers_backlog_waits_in_redis(bus: RedisEventBus) -> None:
    sub = await bus.subscribe(maxsize=2)
    for i in range(30):
        await bus.publish(CapacityFreed(instance=f"i{i}"))  # never blocks the publisher
    await eventually(sub.queue.full)
    await asyncio.sleep(0.1)
    assert sub.queue.qsize() == 2
    assert await bus.client.xlen(bus.stream) == 30
    got = [await sub.get(2) for _ in range(30)]
    assert [e.instance for e in got] == [f"i{i}" for i in range(30)]  # type: ignore[union-attr]
    (group,) = await bus.client.xinfo_groups(bus.stream)
    assert group["pending"] == 0  # every delivered entry was acknowledged


async def test_drop_oldest_keeps_the_newest(bus: RedisEventBus) -> None:
    sub = await bus.subscribe(maxsize=3, overflow="drop_oldest")
    for i in range(10):
        await bus.publish(CapacityFreed(instance=f"i{i}"))
    await eventually(lambda: sub.dropped == 7)
    got = [await sub.get(1) for _ in range(3)]
    assert [e.instance for e in got] == ["i7", "i8", "i9"]  # type: ignore[union-attr]


async def test_processes_share_a_namespace(bus: RedisEventBus, redis_server: str) -> None:
    other = RedisEventBus(redis_server, namespace=bus.stream[len("{megaflow:") : -len("}:events")])
    await other.start()
    try:
        subs = [await bus.subscribe(), await other.subscribe()]
        await other.publish(CapacityFreed(instance="from-other"))
        for sub in subs:
            assert (await sub.get(2)).instance == "from-other"  # type: ignore[union-attr]
        assert len(await bus.client.xinfo_groups(bus.stream)) == 2
        await subs[0].close()
        await subs[0].close()  # closing twice is fine
        assert len(await bus.client.xinfo_groups(bus.stream)) == 1  # its group is gone
    finally:
        await other.stop()
    assert await bus.client.xinfo_groups(bus.stream) == []


async def test_subscription_survives_a_server_restart(tmp_path: Path) -> None:
    port = free_port()
    server = start_redis(tmp_path / "a", port)
    b = RedisEventBus(f"redis://127.0.0.1:{port}/0", namespace="restart", block_ms=200)
    try:
        await b.start()
        sub = await b.subscribe()
        await b.publish(CapacityFreed(instance="before"))
        assert (await sub.get(2)).instance == "before"  # type: ignore[union-attr]
        stop(server)  # the server loses the stream and every consumer group
        server = start_redis(tmp_path / "b", port)
        for _ in range(100):  # publishing retries until the client has reconnected
            try:
                await b.publish(CapacityFreed(instance="after"))
                break
            except ConnectionError:
                await asyncio.sleep(0.05)
        got = await sub.get(5)
        assert got.instance == "after"  # type: ignore[union-attr]
    finally:
        await b.stop()
        stop(server)


async def test_groups_of_crashed_subscribers_are_pruned(redis_server: str) -> None:
    ns = f"test-{uuid.uuid4().hex[:12]}"
    crashed = RedisEventBus(redis_server, namespace=ns, block_ms=50)
    await crashed.start()
    gone = await crashed.subscribe()
    await crashed.publish(CapacityFreed(instance="x"))
    await gone.get(2)
    for sub in crashed._subs:  # the process dies: readers stop, nothing is closed
        assert sub._reader is not None
        sub.closed = True  # (only so that the reader cannot go on after the cancel)
        sub._reader.cancel()
    live = RedisEventBus(redis_server, namespace=ns, block_ms=50, stale_after_s=0.3)
    await live.start()
    try:
        kept = await live.subscribe()
        await asyncio.sleep(0.5)
        assert await live.prune_stale_groups() == 1  # the crashed one, not the live one
        (group,) = await live.client.xinfo_groups(live.stream)
        assert group["name"].decode() == kept.group
        await live.publish(CapacityFreed(instance="y"))
        assert (await kept.get(2)).instance == "y"  # type: ignore[union-attr]
    finally:
        await live.stop()
        crashed._subs.clear()
        await crashed.stop()


async def _cut_off_a_read(bus: RedisEventBus, sub: RedisSubscription, instance: str) -> None:
    """Stop the reader, then let Redis hand it an entry whose reply is lost,
    as when a read is cancelled or its connection drops mid-way."""
    sub.closed = True
    while sub._reader is not None and not sub._reader.done():
        sub._reader.cancel()
        await asyncio.wait([sub._reader], timeout=0.05)
    sub.closed = False
    await bus.publish(CapacityFreed(instance=instance))
    lost = await bus.client.xreadgroup(sub.group, "reader", {bus.stream: ">"}, count=10)
    assert len(lost[0][1]) == 1
    sub._recover = True


async def test_an_entry_cut_off_mid_read_is_delivered_once(bus: RedisEventBus) -> None:
    sub = await bus.subscribe()
    await bus.publish(CapacityFreed(instance="a"))
    assert (await sub.get(2)).instance == "a"  # type: ignore[union-attr]
    await _cut_off_a_read(bus, sub, "b")
    sub.start()
    await bus.publish(CapacityFreed(instance="c"))
    got = [await sub.get(2), await sub.get(2)]
    assert [e.instance for e in got] == ["b", "c"]  # type: ignore[union-attr]
    with pytest.raises(TimeoutError):
        await sub.get(0.1)


async def test_close_still_delivers_an_entry_cut_off_mid_read(bus: RedisEventBus) -> None:
    sub = await bus.subscribe()
    await _cut_off_a_read(bus, sub, "b")
    await bus.publish(CapacityFreed(instance="c"))
    await sub.close()
    assert [e.instance async for e in sub] == ["b", "c"]  # type: ignore[union-attr]

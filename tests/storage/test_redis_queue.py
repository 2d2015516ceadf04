"""Redis queue specifics on real servers: acknowledgements, crashed consumers
and hash-tagged keys on a 3-node cluster."""

from __future__ import annotations

import asyncio
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.crc import key_slot

from megaflow.core.errors import ConfigError, TransportError
from megaflow.core.tasks import TaskSpec
from megaflow.storage import redis_client
from megaflow.storage.abstract import QueuedTask
from megaflow.storage.redis_queue import RedisTaskQueue
from tests.fixtures.servers import free_port

pytestmark = pytest.mark.services
CLAIM_S = 0.2


def item(i: int, priority: int = 0) -> QueuedTask:
    return QueuedTask(spec=TaskSpec(id=f"t{i}", run_id="r", priority=priority), seq=i)


def ids(items: list[QueuedTask]) -> list[str]:
    return [i.task_id for i in items]


@pytest.fixture
async def client(redis_server: str) -> AsyncIterator[Any]:
    c = redis_client.connect(redis_server)
    yield c
    await redis_client.close(c)


@pytest.fixture
async def pair(client: Any) -> AsyncIterator[tuple[RedisTaskQueue, RedisTaskQueue]]:
    """Two schedulers' queues (consumers 'a' and 'b') on one namespace."""
    ns = f"test-{uuid.uuid4().hex[:12]}"
    qs = [
        RedisTaskQueue(namespace=ns, consumer=c, claim_after_s=CLAIM_S, client=client)
        for c in ("a", "b")
    ]
    for q in qs:
        await q.start()
    yield qs[0], qs[1]
    for q in qs:
        await q.stop()


CRASHING_CONSUMER = """
import asyncio, os, signal, sys
from megaflow.storage.redis_queue import RedisTaskQueue

async def main():
    q = RedisTaskQueue(sys.argv[1], namespace=sys.argv[2], consumer="a")
    await q.start()
    print(" ".join(i.task_id for i in await q.pop(2)), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # die before acknowledging

asyncio.run(main())
"""


async def test_crashed_consumers_entries_are_claimed_and_redelivered(
    pair: tuple[RedisTaskQueue, RedisTaskQueue], redis_server: str, client: Any
) -> None:
    a, b = pair
    await a.push([item(1, 5), item(2, 5), item(3, 0)])
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CRASHING_CONSUMER, redis_server, a.namespace,
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == -signal.SIGKILL
    assert out.decode().split() == ["t1", "t2"]
    patient = RedisTaskQueue(namespace=a.namespace, consumer="c", claim_after_s=60, client=client)
    await patient.start()
    assert ids(await patient.pop(5)) == ["t3"]  # t1, t2 not idle for 60 s: not taken over
    await patient.ack(["t3"])
    await asyncio.sleep(CLAIM_S * 1.5)
    assert await b.size() == 2
    assert ids(await b.peek(5)) == ["t1", "t2"]
    again = await b.pop(5)
    assert ids(again) == ["t1", "t2"]
    assert again[0].spec.priority == 5
    assert await b.unacked() == 2
    assert await b.ack(["t1", "t2", "t1"]) == 2  # acknowledging twice counts once
    await asyncio.sleep(CLAIM_S * 1.5)
    assert await b.pop(5) == []  # acknowledged entries never come back
    assert await a.size() == 0
    assert await b.unacked() == 0


async def test_acknowledged_entries_and_their_lanes_are_gone(
    pair: tuple[RedisTaskQueue, RedisTaskQueue], client: Any
) -> None:
    a, _ = pair
    await a.push([item(1, 1), item(2, 2)])
    await a.pop(2)
    assert await a.ack(["t1", "t2"]) == 2
    keys = [k async for k in client.scan_iter(match=a.prefix.replace("{", "[{]") + "*")]
    assert keys == []  # nothing is left behind in Redis


async def test_push_of_an_unacknowledged_id_replaces_its_delivery(
    pair: tuple[RedisTaskQueue, RedisTaskQueue],
) -> None:
    a, b = pair
    await a.push([item(1)])
    await a.pop()
    await a.push([item(1, 9)])  # e.g. recovery re-queues the task after a crash
    await asyncio.sleep(CLAIM_S * 1.5)
    (only,) = await b.pop(5)  # one delivery, not the stale one as well
    assert only.spec.priority == 9
    assert await b.ack(["t1"]) == 1
    assert await a.ack(["t1"]) == 0


async def test_removing_an_unacknowledged_id_stops_redelivery(
    pair: tuple[RedisTaskQueue, RedisTaskQueue],
) -> None:
    a, b = pair
    await a.push([item(1), item(2)])
    await a.pop(2)
    assert await a.remove(["t1"]) == 1  # cancelled while in flight
    await asyncio.sleep(CLAIM_S * 1.5)
    assert ids(await b.pop(5)) == ["t2"]


async def test_unreachable_server_and_bad_namespace_are_clear_errors() -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    q = RedisTaskQueue(url, namespace="x")
    with pytest.raises(TransportError, match="cannot reach redis at"):
        await q.start()
    await q.stop()
    with pytest.raises(ConfigError, match="namespace"):
        RedisTaskQueue(namespace="a}b")


async def test_hash_tagged_keys_share_a_slot_and_namespaces_spread(redis_cluster: str) -> None:
    client = redis_client.connect(redis_cluster, cluster=True)
    try:
        await client.initialize()  # learn the slot map
        # Two namespaces whose keys live on different nodes of the cluster.
        names: dict[str, str] = {}
        while len(names) < 2:
            ns = f"test-{uuid.uuid4().hex[:8]}"
            node = client.get_node_from_key(redis_client.key_prefix(ns) + "q:lanes").name
            names.setdefault(node, ns)
        for ns in names.values():
            q = RedisTaskQueue(namespace=ns, consumer="c", client=client)
            await q.start()
            await q.push([item(1, 1), item(2, 2), item(3, 3)])
            assert ids(await q.pop(2)) == ["t3", "t2"]
            slot = key_slot(q.prefix.encode())
            assert slot == key_slot((q.prefix + "q:lane:7").encode())
            # lanes, queued, pending and the three lane streams: all in one slot
            assert await client.cluster_countkeysinslot(slot) == 6
            assert await q.ack(["t3", "t2"]) == 2
            assert ids(await q.pop(5)) == ["t1"]
            await q.ack(["t1"])
            assert await client.cluster_countkeysinslot(slot) == 0
            await q.stop()
    finally:
        await redis_client.close(client)


async def test_queue_keeps_working_after_the_server_restarts(tmp_path: Any) -> None:
    from tests.fixtures.servers import start_redis, stop

    port = free_port()
    server = start_redis(tmp_path / "r", port)
    queue = RedisTaskQueue(f"redis://127.0.0.1:{port}/0", namespace="restart")
    try:
        await queue.start()
        await queue.push([QueuedTask(spec=TaskSpec(id="a", run_id="r"), seq=1)])
        server.kill()  # SIGKILL: the pooled connection is dead, the data gone
        server.wait(10)
        server = start_redis(tmp_path / "r", port)
        # the first command after the restart must not fail on the stale socket
        await queue.push([QueuedTask(spec=TaskSpec(id="b", run_id="r"), seq=2)])
        assert [i.task_id for i in await queue.pop(10)] == ["b"]
    finally:
        await queue.stop()
        stop(server)

"""Redis Streams task queue and event bus against the in-process ones.

Starts a throw-away ``redis-server`` on loopback (no persistence), as the
tests do, and measures through the ``TaskQueue`` / ``EventBus`` APIs:
- push: ``push`` in batches (tasks/s);
- pop+ack: ``pop`` in batches, then ``ack`` of the batch (tasks/s);
- one-by-one: ``push`` one task, ``pop`` it, ``ack`` it (tasks/s);
- events: ``publish`` one event at a time while one subscriber reads them
  all (events/s, publish to receipt).
The peer is the in-process queue and bus, measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent))

from tests.fixtures.servers import free_port, start_redis, stop

from ab import ratios, spread
from megaflow.core.events import CapacityFreed
from megaflow.core.tasks import TaskSpec
from megaflow.storage.abstract import EventBus, QueuedTask, TaskQueue
from megaflow.storage.memory_bus import MemoryEventBus
from megaflow.storage.memory_queue import MemoryTaskQueue
from megaflow.storage.redis_bus import RedisEventBus
from megaflow.storage.redis_queue import RedisTaskQueue
from report import LOAD_AT_START, report


def items(n: int, tag: str) -> list[QueuedTask]:
    return [
        QueuedTask(spec=TaskSpec(id=f"{tag}/t{i}", run_id=tag, priority=i % 4), seq=i)
        for i in range(n)
    ]


async def queue_rates(q: TaskQueue, n: int, batch: int, singles: int) -> dict[str, float]:
    out: dict[str, float] = {}
    await q.start()
    try:
        todo = items(n, "b")
        t0 = time.perf_counter()
        for i in range(0, n, batch):
            await q.push(todo[i : i + batch])
        out["push"] = n / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        got = 0
        while taken := await q.pop(batch):
            await q.ack(i.task_id for i in taken)
            got += len(taken)
        out["pop"] = n / (time.perf_counter() - t0)
        assert got == n, f"popped {got} of {n}"
        one = items(singles, "s")
        t0 = time.perf_counter()
        for it in one:
            await q.push([it])
            (taken1,) = await q.pop()
            await q.ack([taken1.task_id])
        out["single"] = singles / (time.perf_counter() - t0)
    finally:
        await q.stop()
    return out


async def event_rate(bus: EventBus, n: int) -> float:
    await bus.start()
    try:
        sub = await bus.subscribe(maxsize=1024)

        async def drain() -> None:
            for _ in range(n):
                await sub.get(30)

        reader = asyncio.create_task(drain())
        t0 = time.perf_counter()
        for i in range(n):
            await bus.publish(CapacityFreed(instance=f"i{i}"))
        await reader
        return n / (time.perf_counter() - t0)
    finally:
        await bus.stop()


async def ping_rate(url: str, n: int) -> float:
    """The floor: bare redis-py round trips, one command each."""
    from megaflow.storage import redis_client

    client = redis_client.connect(url)
    try:
        await client.ping()
        t0 = time.perf_counter()
        for _ in range(n):
            await client.ping()
        return n / (time.perf_counter() - t0)
    finally:
        await redis_client.close(client)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tasks", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--quick", action="store_true", help="a short run (2,000 tasks)")
    ap.add_argument("--reps", type=int, default=3, help="interleaved repetitions (>= 3)")
    args = ap.parse_args()
    reps = max(3, args.reps)
    n = 2000 if args.quick else args.tasks
    singles = events = max(n // 10, 200)
    if shutil.which("redis-server") is None:
        sys.exit("needs redis-server: run `make sysdeps`")
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        server = start_redis(Path(tmp), port)
        try:
            url = f"redis://127.0.0.1:{port}/0"
            mem, red, mem_ev, red_ev = [], [], [], []
            for rep in range(reps):  # interleaved: in-process, redis, in-process, ...
                ns = f"bench{rep}"
                mem.append(asyncio.run(queue_rates(MemoryTaskQueue(), n, args.batch, singles)))
                red_q = RedisTaskQueue(url, namespace=ns)
                red.append(asyncio.run(queue_rates(red_q, n, args.batch, singles)))
                mem_ev.append(asyncio.run(event_rate(MemoryEventBus(), events)))
                red_ev.append(asyncio.run(event_rate(RedisEventBus(url, namespace=ns), events)))
            pings = asyncio.run(ping_rate(url, singles))
        finally:
            stop(server)

    def row(what: str, size: str, r: list[float], m: list[float]) -> list[str]:
        big = "{:,.0f}".format
        return [what, size, spread(r, big), spread(m, big), spread(ratios(m, r), "{:,.0f}x".format)]

    def key(runs: list[dict[str, float]], k: str) -> list[float]:
        return [r[k] for r in runs]

    rows = [
        row("push (tasks/s)", str(args.batch), key(red, "push"), key(mem, "push")),
        row("pop + ack (tasks/s)", str(args.batch), key(red, "pop"), key(mem, "pop")),
        row("push, pop, ack one by one (tasks/s)", "1", key(red, "single"), key(mem, "single")),
        row("events publish -> receive (events/s)", "1", red_ev, mem_ev),
    ]
    report(
        "redis_queue",
        f"Redis Streams queue and bus vs in-process ({n:,} tasks, {events:,} events)",
        ["operation", "batch", "redis", "peer: in-process", "in-process / redis"],
        rows,
        notes="One redis-server on loopback, no persistence; four priority lanes; "
        "every popped task acknowledged. Each queue call is one Lua script, one round "
        f"trip; a bare redis-py PING round trip in the same run: {pings:,.0f}/s "
        f"({1e3 / pings:.2f} ms), so one-by-one is bound by 3 round trips per task. "
        f"Median (min-max) of {reps} repetitions interleaved in-process, redis, in-process, "
        "..., each on a fresh namespace of one server started before any timing; the ratio "
        "is taken within each repetition.",
        load_before=LOAD_AT_START,
    )


if __name__ == "__main__":
    main()

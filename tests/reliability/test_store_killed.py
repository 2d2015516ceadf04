"""SIGKILL of the Redis server under a running scheduler (queue and event bus).

The scheduler keeps its metadata in SQLite and its task queue and event bus
on a real ``redis-server``. Once every task has been taken in from the queue
and some have finished, Redis is SIGKILLed (it keeps no data: it comes back
empty) and restarted on the same port a moment later. Checked: the run
finishes with every task in exactly one terminal state and one result, and
the metadata store is intact; the scheduler survives the outage (publishing
events fails while Redis is down, and the event subscription reconnects).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from megaflow.core.states import TaskState
from megaflow.core.tasks import RunSpec, TaskSpec
from megaflow.scheduler import Scheduler, SchedulerConfig
from megaflow.scheduler.synthetic import SleepExecutor
from megaflow.storage.config import StorageConfig
from megaflow.storage.factory import Stores
from tests.fixtures.servers import free_port, start_redis, stop
from tests.reliability.ledger import check_ledger, integrity_check, read_ledger
from tests.scheduler.helpers import until

N = 20


@pytest.mark.slow
@pytest.mark.services
async def test_redis_killed_under_running_scheduler(tmp_path: Path) -> None:
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    db = tmp_path / "m.db"
    cfg = StorageConfig.model_validate({
        "metadata": {"type": "sqlite", "path": str(db)},
        "queue": {"type": "redis", "url": url},
        "events": {"type": "redis", "url": url},
        "artifacts": {"type": "local", "root": str(tmp_path / "art")},
    })  # fmt: skip
    redis = start_redis(tmp_path / "redis", port)
    try:
        stores = Stores.from_config(cfg)
        run = RunSpec(id="redis-kill", name="redis-kill")
        tasks = [TaskSpec(id=f"t{i}", run_id=run.id, payload={"sleep_s": 0.2}) for i in range(N)]
        sched_cfg = SchedulerConfig(max_concurrency=2, retry={"base_s": 0.2, "max_s": 1.0})
        async with stores:
            sched = Scheduler(sched_cfg, stores, SleepExecutor(), seed=1)
            await sched.start()
            try:
                await sched.submit(run, tasks)
                # every task taken in from the queue, some finished
                await until(lambda: len(sched.run_of) == N, 30)
                await until(lambda: sched.counts(run.id).get(TaskState.SUCCEEDED, 0) >= 4, 30)
                redis.kill()
                redis.wait(10)
                await asyncio.sleep(1.0)  # tasks keep finishing while Redis is gone
                redis = start_redis(tmp_path / "redis", port)
                counts = await asyncio.wait_for(sched.wait(run.id), 60)
            finally:
                await sched.stop()
            led = await read_ledger(stores.metadata, run.id)
    finally:
        stop(redis)

    assert counts == {TaskState.SUCCEEDED: N}
    check_ledger(led, N)
    assert integrity_check(db) == "ok"

"""The scheduler over Redis Streams (queue and events) on a real redis-server."""

from __future__ import annotations

import secrets

import pytest

from megaflow.core.states import TaskState
from megaflow.core.tasks import RunSpec, TaskSpec
from megaflow.scheduler.config import SchedulerConfig
from megaflow.scheduler.service import Scheduler
from megaflow.scheduler.synthetic import NoopExecutor
from megaflow.storage.config import (
    RedisEventsConfig,
    RedisQueueConfig,
    SqliteMetadataConfig,
    StorageConfig,
)
from megaflow.storage.factory import Stores
from megaflow.storage.redis_queue import RedisTaskQueue
from megaflow.storage.retrying import RetryingTaskQueue


@pytest.mark.services
async def test_a_run_over_redis_finishes_and_acknowledges_every_entry(
    redis_server: str, tmp_path: object
) -> None:
    ns = f"sched-{secrets.token_hex(3)}"
    stores = Stores.from_config(
        StorageConfig(
            metadata=SqliteMetadataConfig(path=":memory:"),
            queue=RedisQueueConfig(url=redis_server, namespace=ns),
            events=RedisEventsConfig(url=redis_server, namespace=ns),
        )
    )
    async with stores:
        async with Scheduler(SchedulerConfig(max_concurrency=16), stores, NoopExecutor()) as sched:
            tasks = [TaskSpec(id=f"r/{i}", run_id="r", priority=i % 4) for i in range(300)]
            await sched.submit(RunSpec(id="r"), tasks)
            counts = await sched.wait("r")
        assert isinstance(stores.queue, RetryingTaskQueue)  # waits out Redis faults
        queue = stores.queue.inner
        assert isinstance(queue, RedisTaskQueue)
        assert counts == {TaskState.SUCCEEDED: 300}
        assert await queue.size() == 0
        assert await queue.unacked() == 0  # nothing would be delivered twice

"""A MegaFlow control plane with a forced backlog, serving its metrics.

Run as a script by the Prometheus integration test: a real Scheduler on
SQLite with one slot and tasks that each take a minute, so the queue holds
them; its registry is served on ``127.0.0.1:PORT/metrics``.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from prometheus_client import CollectorRegistry, start_http_server

from megaflow.core.tasks import RunSpec, TaskSpec
from megaflow.monitoring.scheduler import SchedulerMetrics
from megaflow.scheduler.config import SchedulerConfig
from megaflow.scheduler.service import Scheduler
from megaflow.scheduler.synthetic import SleepExecutor
from megaflow.storage.config import LocalArtifactsConfig, SqliteMetadataConfig, StorageConfig
from megaflow.storage.factory import Stores


async def main(port: int, db: str, tasks: int) -> None:
    registry = CollectorRegistry()
    start_http_server(port, addr="127.0.0.1", registry=registry)
    stores = Stores.from_config(
        StorageConfig(
            metadata=SqliteMetadataConfig(path=db),
            artifacts=LocalArtifactsConfig(root=str(Path(db).parent / "artifacts")),  # not in cwd
        )
    )
    async with stores:
        sched = Scheduler(
            SchedulerConfig(max_concurrency=1),
            stores,
            SleepExecutor(default_s=60),
            metrics=SchedulerMetrics(registry),
        )
        async with sched:
            specs = [TaskSpec(id=f"backlog/t{i}", run_id="backlog") for i in range(tasks)]
            await sched.submit(RunSpec(id="backlog"), specs)
            print("ready", flush=True)
            await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2], int(sys.argv[3])))

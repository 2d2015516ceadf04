"""A control plane in its own process, for the SIGKILL-and-resume test.

    python resume_worker.py start  DB LOG N   # submit N tasks and run them
    python resume_worker.py resume DB LOG     # resume the run after a crash

Each finished attempt appends its task id to LOG, so the test can tell which
tasks ran in which process.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from megaflow.core.states import TaskState
from megaflow.core.tasks import RunSpec, TaskResult, TaskSpec
from megaflow.scheduler.abstract import TaskContext, TaskExecutor
from megaflow.scheduler.config import SchedulerConfig
from megaflow.scheduler.service import Scheduler
from megaflow.storage.factory import Stores
from megaflow.storage.local_artifacts import LocalArtifactStore
from megaflow.storage.memory_bus import MemoryEventBus
from megaflow.storage.memory_queue import MemoryTaskQueue
from megaflow.storage.sqlite import SqliteMetadataStore

RUN = "resume-run"


class LoggingSleep(TaskExecutor):
    def __init__(self, log: Path) -> None:
        self.log = log

    async def run(self, ctx: TaskContext) -> TaskResult:
        ctx.stage(TaskState.STARTING)
        ctx.stage(TaskState.RUNNING)
        await asyncio.sleep(0.25)
        ctx.stage(TaskState.GRADING)
        with self.log.open("a") as f:
            f.write(ctx.spec.id + "\n")
        return TaskResult(task_id=ctx.spec.id, success=True, reward=1.0)


async def main(mode: str, db: str, log: str, n: int) -> None:
    stores = Stores(
        metadata=SqliteMetadataStore(db),
        queue=MemoryTaskQueue(),
        events=MemoryEventBus(),
        artifacts=LocalArtifactStore(Path(db).parent / "artifacts"),
    )
    async with stores:
        cfg = SchedulerConfig(max_concurrency=4)
        async with Scheduler(cfg, stores, LoggingSleep(Path(log))) as sched:
            if mode == "start":
                tasks = [TaskSpec(id=f"t{i:03d}", run_id=RUN) for i in range(n)]
                await sched.submit(RunSpec(id=RUN), tasks)
                print("submitted", flush=True)  # the database exists and is migrated
            else:
                await sched.resume(RUN)
            counts = await sched.wait(RUN)
    print(json.dumps({s.value: c for s, c in counts.items()}))


if __name__ == "__main__":
    argv = sys.argv[1:]
    asyncio.run(main(argv[0], argv[1], argv[2], int(argv[3]) if len(argv) > 3 else 0))

"""Builders shared by the scheduler tests: real embedded stores, small task specs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from megaflow.core.tasks import Resources, RunSpec, TaskSpec, TaskType, Timeouts
from megaflow.storage.factory import Stores
from megaflow.storage.local_artifacts import LocalArtifactStore
from megaflow.storage.memory_bus import MemoryEventBus
from megaflow.storage.memory_queue import MemoryTaskQueue
from megaflow.storage.sqlite import SqliteMetadataStore


def make_stores(tmp: Path, db: str = ":memory:") -> Stores:
    return Stores(
        metadata=SqliteMetadataStore(db),
        queue=MemoryTaskQueue(),
        events=MemoryEventBus(),
        artifacts=LocalArtifactStore(tmp / "artifacts"),
    )


def task(
    tid: str,
    run: str = "r1",
    priority: int = 0,
    type_: TaskType | None = None,
    tenant: str = "default",
    cpu: float = 1.0,
    memory_mb: int = 512,
    gpu: int = 0,
    **kw: Any,
) -> TaskSpec:
    timeouts = kw.pop("timeouts", Timeouts())
    return TaskSpec(
        id=tid,
        run_id=run,
        priority=priority,
        type=type_,
        tenant=tenant,
        resources=Resources(cpu=cpu, memory_mb=memory_mb, gpu=gpu),
        timeouts=timeouts,
        **kw,
    )


def run(rid: str = "r1") -> RunSpec:
    return RunSpec(id=rid, name=rid)


async def until(pred: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait for a condition the test cannot await directly (an executor's progress)."""
    for _ in range(int(timeout / 0.01)):
        if pred():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached in time")

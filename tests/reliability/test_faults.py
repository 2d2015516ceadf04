"""Many tasks under injected infrastructure faults: nothing lost, nothing doubled,
nothing leaked.

A seeded 10% of sandbox creations fail with ``SandboxStartError`` (retried
by the scheduler, at most ``max_attempts`` times). A few tasks also end as
agent errors, timeouts or are cancelled while hanging, so that every
terminal state is reached while sandboxes are held.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from megaflow.core.states import TaskState
from megaflow.core.tasks import ErrorKind, RunSpec, TaskSpec
from megaflow.environment.abstract import EnvironmentSpec, Runtime
from megaflow.environment.config import LocalRuntimeConfig, PoolConfig
from megaflow.environment.dummy import DummyRuntime
from megaflow.environment.local import LocalRuntime
from megaflow.environment.pool import SandboxPool
from megaflow.scheduler import Scheduler, SchedulerConfig
from megaflow.storage.factory import Stores
from megaflow.storage.local_artifacts import LocalArtifactStore
from megaflow.storage.memory_bus import MemoryEventBus
from megaflow.storage.memory_queue import MemoryTaskQueue
from megaflow.storage.sqlite import SqliteMetadataStore
from tests.reliability.faults import FaultyRuntime, SandboxTaskExecutor
from tests.reliability.ledger import Ledger, check_ledger, integrity_check, read_ledger
from tests.scheduler.helpers import until

MAX_ATTEMPTS = 3


def plan(n: int) -> dict[str, str]:
    """Deterministic endings for a few tasks: 1% agent, 1% timeout, 0.5% hang."""
    out = {}
    for i in range(n):
        if i % 100 == 7:
            out[f"t{i}"] = "agent"
        elif i % 100 == 37:
            out[f"t{i}"] = "timeout"
        elif i % 200 == 77:
            out[f"t{i}"] = "hang"
    return out


def holding_or_done(state: TaskState | None) -> bool:
    return state is not None and (state is TaskState.RUNNING or state.terminal)


async def run_faulty(
    tmp: Path, runtime: Runtime, n: int, concurrency: int, spec: EnvironmentSpec
) -> None:
    db = tmp / "m.db"
    stores = Stores(
        metadata=SqliteMetadataStore(db),
        queue=MemoryTaskQueue(),
        events=MemoryEventBus(),
        artifacts=LocalArtifactStore(tmp / "art"),
    )
    faulty = FaultyRuntime(runtime, rate=0.10, seed=7)
    endings = plan(n)
    run = RunSpec(id="rel", name="rel")
    tasks = [
        TaskSpec(
            id=f"t{i}",
            run_id=run.id,
            max_attempts=MAX_ATTEMPTS,
            payload={"then": endings[f"t{i}"]} if f"t{i}" in endings else {},
        )
        for i in range(n)
    ]
    cfg = SchedulerConfig(
        max_concurrency=concurrency, retry={"base_s": 0.001, "max_s": 0.01, "jitter": 0.5}
    )
    async with stores:
        await faulty.start()
        pool = SandboxPool(faulty, "ephemeral", PoolConfig(warm_share=0))
        executor = SandboxTaskExecutor(pool, spec)
        sched = Scheduler(cfg, stores, executor, seed=1)
        try:
            await sched.start()
            await sched.submit(run, tasks)
            hangs = [t for t, e in endings.items() if e == "hang"]
            # cancel the hanging tasks once each holds its sandbox (or has failed)
            await until(lambda: all(holding_or_done(sched.state.get(t)) for t in hangs), 60)
            for t in hangs:
                await sched.cancel(run.id, t)
            counts = await asyncio.wait_for(sched.wait(run.id), 120)
        finally:
            await sched.stop()
            await pool.stop()
            leftover = await faulty.list()
            await faulty.stop()
        led = await read_ledger(stores.metadata, run.id)

    assert dict(counts) == dict(led.states)
    exhausted = check_fault_books(led, faulty, endings, n)
    # nothing leaked: every sandbox created was given back and destroyed
    assert executor.in_use == set()
    assert executor.released == faulty.created
    assert leftover == []
    assert all(c["busy"] == 0 and c["idle"] == 0 for c in pool.counts().values())
    assert integrity_check(db) == "ok"
    states = {k.value: v for k, v in led.states.items()}
    print(  # the figures docs/reliability.md quotes (pytest -s shows them)
        f"\n{n} tasks, {faulty.injected} infra faults injected in {faulty.calls} sandbox "
        f"creations, {led.retries} retries, {exhausted} failed after {MAX_ATTEMPTS} "
        f"infra failures, states {states}, lost 0, leaked 0"
    )


def check_fault_books(led: Ledger, faulty: FaultyRuntime, endings: dict[str, str], n: int) -> int:
    """The books of a fault run add up; returns how many tasks spent every attempt."""
    # every task ends in exactly one terminal state, with one result
    check_ledger(led, n)
    s = led.states
    done = s[TaskState.SUCCEEDED] + s[TaskState.FAILED] + s[TaskState.TIMED_OUT]
    assert done + s[TaskState.CANCELLED] == n
    # every creation is one attempt; every injected fault is one infra attempt
    assert sum(len(a) for a in led.attempts.values()) == faulty.calls
    assert led.attempts_of_kind(ErrorKind.INFRA) == faulty.injected
    assert faulty.injected >= n * 0.08  # the faults really were injected
    # an infra failure is retried unless it was the task's last attempt
    exhausted = {
        t for t, atts in led.attempts.items()
        if len(atts) == MAX_ATTEMPTS and all(a.error_kind is ErrorKind.INFRA for a in atts)
    }  # fmt: skip
    assert led.retries == faulty.injected - len(exhausted)
    for tid in exhausted:
        assert led.tasks[tid].state is TaskState.FAILED
        assert led.results[tid].error_kind is ErrorKind.INFRA
    # final errors are never retried
    want = {
        "agent": (TaskState.FAILED, ErrorKind.AGENT),
        "timeout": (TaskState.TIMED_OUT, ErrorKind.TIMEOUT),
        "hang": (TaskState.CANCELLED, ErrorKind.CANCELLED),
    }
    for tid, ending in endings.items():
        if tid in exhausted:
            continue
        atts = led.attempts[tid]
        assert (led.tasks[tid].state, atts[-1].error_kind) == want[ending], (tid, atts[-1])
        assert all(a.error_kind is ErrorKind.INFRA for a in atts[:-1])
    assert s[TaskState.SUCCEEDED] == n - len(exhausted | set(endings))
    ok = [t for t, r in led.tasks.items() if r.state is TaskState.SUCCEEDED]
    assert all(led.results[t].success for t in ok)
    return len(exhausted)


@pytest.mark.slow
async def test_10000_tasks_with_10pct_infra_faults(tmp_path: Path) -> None:
    await run_faulty(tmp_path, DummyRuntime(), 10_000, 256, EnvironmentSpec())


@pytest.mark.slow
async def test_200_real_sandboxes_with_10pct_start_faults(tmp_path: Path) -> None:
    runtime = LocalRuntime(LocalRuntimeConfig(root=str(tmp_path / "sb")))
    spec = EnvironmentSpec(image="host")
    await run_faulty(tmp_path, runtime, 200, os.cpu_count() or 2, spec)
    # the runtime's own directory holds no sandbox any more (also checked by `leaks`)
    assert not list((tmp_path / "sb").glob("boxes/*"))

"""The scheduler end to end on real embedded stores: events, outcomes, retries,
timeouts, cancellation, preemption and instance loss."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from megaflow.core.events import InstanceHeartbeat, InstanceJoined, InstanceLost
from megaflow.core.states import TaskState
from megaflow.core.tasks import ErrorKind, TaskResult, Timeouts
from megaflow.scheduler.abstract import InstanceSpec, TaskExecutor
from megaflow.scheduler.config import PriorityPolicyConfig, RetryConfig, SchedulerConfig
from megaflow.scheduler.service import Scheduler
from megaflow.scheduler.synthetic import FaultExecutor, FaultPlan, NoopExecutor, SleepExecutor
from megaflow.storage.factory import Stores
from tests.scheduler.helpers import make_stores, run, task, until

FAST_RETRY = RetryConfig(base_s=0.01, max_s=0.05)


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[Stores]:
    s = make_stores(tmp_path)
    async with s:
        yield s


def sched(stores: Stores, executor: TaskExecutor, **kw: object) -> Scheduler:
    instances = kw.pop("instances", None)
    cfg = SchedulerConfig(retry=FAST_RETRY, **kw)  # type: ignore[arg-type]
    return Scheduler(cfg, stores, executor, instances=instances, seed=7)  # type: ignore[arg-type]


async def test_idle_dispatcher_is_not_woken(stores: Stores) -> None:
    async with sched(stores, NoopExecutor()) as s:
        await s.submit(run(), [task("t1")])
        await s.wait("r1")
        await asyncio.sleep(0.2)  # the round woken by the last task's end, if still due
        rounds, events = s.rounds, s.events_handled
        await asyncio.sleep(1.0)
        assert (s.rounds, s.events_handled) == (rounds, events)


async def test_tasks_run_through_every_stage_and_are_recorded(stores: Stores) -> None:
    async with sched(stores, NoopExecutor(), max_concurrency=4) as s:
        sub = await stores.events.subscribe(["task_finished"])
        await s.submit(run(), [task(f"t{i}") for i in range(20)])
        counts = await s.wait("r1")
        assert counts == {TaskState.SUCCEEDED: 20}
        assert s.counts("r1") == {TaskState.SUCCEEDED: 20}
        finished = [await sub.get(timeout=5) for _ in range(20)]
        await sub.close()
    assert {e.task_id for e in finished} == {f"t{i}" for i in range(20)}  # type: ignore[union-attr]
    rec = await stores.metadata.get_task("t3")
    assert (rec.attempts, rec.preemptions) == (1, 0)
    (attempt,) = await stores.metadata.list_attempts("t3")
    assert attempt.error_kind is None
    assert attempt.instance == "local"
    assert (await stores.metadata.get_result("t3")).success


async def test_concurrency_never_exceeds_the_cap(stores: Stores) -> None:
    peak = 0

    class Counting(SleepExecutor):
        live = 0

        async def run(self, ctx):  # type: ignore[no-untyped-def]
            nonlocal peak
            Counting.live += 1
            peak = max(peak, Counting.live)
            try:
                return await super().run(ctx)
            finally:
                Counting.live -= 1

    async with sched(stores, Counting(0.005), max_concurrency=3) as s:
        await s.submit(run(), [task(f"t{i}") for i in range(30)])
        assert await s.wait("r1") == {TaskState.SUCCEEDED: 30}
    assert peak == 3


async def test_retry_classification(stores: Stores) -> None:
    ex = FaultExecutor(
        plans={
            "flaky": FaultPlan(infra_failures=2),
            "broken": FaultPlan(infra_failures=99),
            "agent": FaultPlan(then="agent"),
            "slow": FaultPlan(then="timeout"),
        }
    )
    tasks = [
        task("flaky", max_attempts=3),
        task("broken", max_attempts=2),
        task("agent", max_attempts=5),
        task("slow", max_attempts=5),
        task("deadline", max_attempts=5, timeouts=Timeouts(deadline_s=0.05)),
    ]
    ex.plans["deadline"] = FaultPlan(then="hang")
    async with sched(stores, ex) as s:
        await s.submit(run(), tasks)
        await s.wait("r1")
    md = stores.metadata
    want = {
        "flaky": (TaskState.SUCCEEDED, 3),
        "broken": (TaskState.FAILED, 2),
        "agent": (TaskState.FAILED, 1),
        "slow": (TaskState.TIMED_OUT, 1),
        "deadline": (TaskState.TIMED_OUT, 1),
    }
    for tid, (state, attempts) in want.items():
        rec = await md.get_task(tid)
        assert (rec.state, rec.attempts, ex.calls[tid]) == (state, attempts, attempts), tid
    kinds = [a.error_kind for a in await md.list_attempts("flaky")]
    assert kinds == [ErrorKind.INFRA, ErrorKind.INFRA, None]
    assert (await md.get_result("agent")).error_kind is ErrorKind.AGENT
    assert (await md.get_result("broken")).error_kind is ErrorKind.INFRA
    assert "deadline" in ex.torn_down  # the hung attempt was cancelled and cleaned up


def test_backoff_grows_exponentially_with_jitter(tmp_path: Path) -> None:
    cfg = SchedulerConfig(retry=RetryConfig(base_s=1.0, max_s=8.0, jitter=0.5))
    s = Scheduler(cfg, make_stores(tmp_path), NoopExecutor(), seed=1)
    delays = [[s.backoff(n) for _ in range(200)] for n in (1, 2, 3, 4, 5)]
    for n, ds in enumerate(delays, start=1):
        top = min(8.0, 2.0 ** (n - 1))
        assert all(top * 0.5 <= d <= top for d in ds)
        assert max(ds) - min(ds) > 0.1 * top  # jittered, not constant


async def test_start_and_queue_timeouts(stores: Stores) -> None:
    class SlowStart(TaskExecutor):
        async def run(self, ctx):  # type: ignore[no-untyped-def]
            ctx.stage(TaskState.STARTING)
            await asyncio.sleep(10)
            raise AssertionError("not reached")

    tasks = [
        task("a", timeouts=Timeouts(start_s=0.05)),
        task("b", timeouts=Timeouts(queue_s=0.05)),
    ]
    async with sched(stores, SlowStart(), max_concurrency=1) as s:
        await s.submit(run(), tasks)
        await s.wait("r1")
    assert (await stores.metadata.get_task("a")).state is TaskState.TIMED_OUT
    b = await stores.metadata.get_task("b")
    assert (b.state, b.attempts) == (TaskState.TIMED_OUT, 0)


async def test_cancel_a_task_and_a_run_tears_down_running_work(stores: Stores) -> None:
    ex = FaultExecutor()
    tasks = [task(f"t{i}", payload={"fault": {"then": "hang"}}) for i in range(6)]
    async with sched(stores, ex, max_concurrency=2) as s:
        await s.submit(run(), tasks)
        await until(lambda: len(ex.calls) >= 2)
        running = sorted(ex.calls)
        assert await s.cancel("r1", running[0]) == 1
        assert (await stores.metadata.get_task(running[0])).state is TaskState.CANCELLED
        assert running[0] in ex.torn_down
        await until(lambda: len(ex.calls) >= 3)
        await s.cancel("r1")
        counts = await s.wait("r1")
    assert counts == {TaskState.CANCELLED: 6}
    assert sorted(ex.torn_down) == sorted(ex.calls)  # every started attempt cleaned up
    assert len(ex.calls) == 3  # the queued ones never started


class FirstSlow(TaskExecutor):
    """Each task's first attempt holds its slot for a long time; later ones finish at once."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.instances: dict[str, list[str]] = {}
        self.torn_down: list[str] = []

    async def run(self, ctx):  # type: ignore[no-untyped-def]
        tid = ctx.spec.id
        n = self.calls[tid] = self.calls.get(tid, 0) + 1
        self.instances.setdefault(tid, []).append(ctx.instance)
        ctx.stage(TaskState.RUNNING)
        try:
            if n == 1:
                await asyncio.sleep(60)
        finally:
            self.torn_down.append(tid)
        return TaskResult(task_id=tid, success=True)


async def test_preemption_requeues_without_counting_a_failure(stores: Stores) -> None:
    ex = FirstSlow()
    inst = InstanceSpec("one", cpu=1, memory_mb=4096, slots=1)
    policy = PriorityPolicyConfig(aging_per_s=0)
    async with sched(stores, ex, max_concurrency=1, preemption=True, policy=policy,
                     instances=[inst]) as s:  # fmt: skip
        await s.submit(run(), [task("low", priority=1, max_attempts=1)])
        await until(lambda: "low" in ex.calls)
        ex.calls["high"] = 1  # the high task's first attempt is quick too
        await s.submit(run(), [task("high", priority=10)])
        assert await s.wait("r1") == {TaskState.SUCCEEDED: 2}
    low = await stores.metadata.get_task("low")
    assert (low.preemptions, low.attempts, ex.calls["low"]) == (1, 2, 2)
    assert "low" in ex.torn_down


async def test_lost_instance_requeues_its_tasks(stores: Stores) -> None:
    ex = FirstSlow()
    async with sched(stores, ex, max_concurrency=10, heartbeat_timeout_s=2.0, instances=[]) as s:
        bus = stores.events
        # a fits two tasks exactly (best fit fills it first); b has room to spare.
        for name, n in (("a", 2), ("b", 4)):
            cap = {"cpu": n, "memory_mb": 2048 * n, "slots": n}
            await bus.publish(InstanceJoined(instance=name, capacity=cap))

        async def heartbeat_b() -> None:
            while True:
                await bus.publish(InstanceHeartbeat(instance="b"))
                await asyncio.sleep(0.1)

        beat = asyncio.create_task(heartbeat_b())
        try:
            await s.submit(run(), [task(f"t{i}") for i in range(4)])
            await until(lambda: len(ex.calls) >= 4)
            on_a = sorted(s.core.instance("a").running)  # type: ignore[union-attr]
            assert len(on_a) == 2
            # b keeps heartbeating while a is lost: a's tasks retry on b.
            await bus.publish(InstanceLost(instance="a", reason="test"))
            await until(lambda: all(ex.calls.get(t) == 2 for t in on_a))
            assert s.core.instance("a") is None
            assert s.core.instance("b") is not None
            assert s.counts("r1")[TaskState.SUCCEEDED] == 2
            await s.cancel("r1")  # b's own first attempts would take a minute
        finally:
            beat.cancel()
    for tid in on_a:
        kinds = [a.error_kind for a in await stores.metadata.list_attempts(tid)]
        assert kinds == [ErrorKind.INFRA, None]
        assert ex.instances[tid] == ["a", "b"]
        assert (await stores.metadata.get_task(tid)).state is TaskState.SUCCEEDED


async def test_silent_instance_is_declared_lost(stores: Stores) -> None:
    async with sched(stores, NoopExecutor(), heartbeat_timeout_s=0.1, instances=[]) as s:
        sub = await stores.events.subscribe(["instance_lost"])
        await stores.events.publish(InstanceJoined(instance="x", capacity={"slots": 1}))
        ev = await sub.get(timeout=5)
        await sub.close()
        assert ev.instance == "x"  # type: ignore[union-attr]
        await asyncio.sleep(0.05)
        assert s.core.instance("x") is None


async def test_cancel_before_the_attempt_ever_ran(stores: Stores) -> None:
    ex = FaultExecutor()
    async with sched(stores, ex, instances=[]) as s:
        await s.submit(run(), [task("t", payload={"fault": {"then": "hang"}})])
        await until(lambda: s.core.depth == 1)
        s.core.add_instance(InstanceSpec("i", cpu=2, memory_mb=4096, slots=1))
        (d,) = s.core.plan(s.now())
        s.start_attempt(d.task, d.instance)
        s.interrupt("t", "cancel", "cancelled")  # same step: the attempt never started
        assert await s.wait("r1") == {TaskState.CANCELLED: 1}
        assert s.core.running == {}
        assert s.core.admission.running == 0
    assert ex.calls == {}

"""The feedback hook: the dispatch core tells the policy how each placement ended."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from megaflow.core.tasks import Outcome, Timeouts
from megaflow.scheduler.abstract import TaskFeedback
from megaflow.scheduler.config import CustomPolicyConfig, RetryConfig, SchedulerConfig
from megaflow.scheduler.policies import PriorityPolicy
from megaflow.scheduler.service import Scheduler
from megaflow.scheduler.synthetic import FaultExecutor, FaultPlan
from megaflow.sim.engine import SimOptions, Simulator
from megaflow.sim.studies import fleet
from megaflow.sim.trace import TraceTask
from tests.scheduler.helpers import make_stores, run, task


class Recording(PriorityPolicy):
    heard: list[TaskFeedback] = []

    def observe(self, feedback: TaskFeedback) -> None:
        Recording.heard.append(feedback)


def test_every_placement_in_the_simulator_reports_once_with_its_times() -> None:
    trace = [TraceTask(arrival_s=0.0, duration_s=1000.0, priority=0) for _ in range(16)]
    trace += [TraceTask(arrival_s=10.0, duration_s=10.0, priority=9) for _ in range(4)]
    policy = CustomPolicyConfig(path=f"{__name__}.Recording", options={"aging_per_s": 0})
    cfg = SchedulerConfig(max_concurrency=10_000, preemption=True, policy=policy)
    sim = Simulator(cfg, fleet(2), trace, options=SimOptions(sandbox_start_s=5.0))
    got: list[TaskFeedback] = []
    sim.core.listeners.append(got.append)
    Recording.heard = []
    asyncio.run(sim.run())
    assert got == Recording.heard  # the policy and the listeners hear the same thing
    # 20 tasks end ok once each; 4 low-priority placements were preempted first.
    assert Counter(fb.outcome for fb in got) == {Outcome.OK: 20, Outcome.PREEMPT: 4}
    ok = {fb.task.id: fb for fb in got if fb.outcome is Outcome.OK}
    assert len(ok) == 20
    for fb in got:
        assert fb.ended_at >= fb.placed_at >= fb.task.enqueued_at
    for i, tt in enumerate(trace):
        fb = ok[f"t{i}"]
        assert fb.run_s == pytest.approx(tt.duration_s + 5.0)
        assert fb.placed_at == pytest.approx(sim.waits()[i] + tt.arrival_s)
    preempted = [fb for fb in got if fb.outcome is Outcome.PREEMPT]
    assert all(fb.task.spec.priority == 0 and fb.run_s == pytest.approx(10.0) for fb in preempted)
    assert all(ok[fb.task.id].task.preemptions == 1 for fb in preempted)


async def test_the_live_scheduler_reports_each_attempt_with_its_outcome(tmp_path: Path) -> None:
    ex = FaultExecutor(
        plans={
            "flaky": FaultPlan(infra_failures=2),
            "agent": FaultPlan(then="agent"),
            "slow": FaultPlan(then="timeout"),
            "deadline": FaultPlan(then="hang"),
        }
    )
    tasks = [
        task("flaky", max_attempts=3),
        task("agent", max_attempts=5),
        task("slow", max_attempts=5),
        task("deadline", max_attempts=5, timeouts=Timeouts(deadline_s=0.05)),
        task("fine"),
    ]
    got: list[TaskFeedback] = []
    stores = make_stores(tmp_path)
    cfg = SchedulerConfig(retry=RetryConfig(base_s=0.01, max_s=0.05))
    async with stores, Scheduler(cfg, stores, ex, seed=7) as s:
        s.core.listeners.append(got.append)
        await s.submit(run(), tasks)
        await s.wait("r1")
    by_task: dict[str, list[Outcome]] = {}
    for fb in got:
        by_task.setdefault(fb.task.id, []).append(fb.outcome)
        assert fb.instance == "local"
        assert fb.ended_at >= fb.placed_at
    assert by_task == {
        "flaky": [Outcome.INFRA, Outcome.INFRA, Outcome.OK],
        "agent": [Outcome.AGENT],
        "slow": [Outcome.TIMEOUT],
        "deadline": [Outcome.TIMEOUT],
        "fine": [Outcome.OK],
    }
    deadline = next(fb for fb in got if fb.task.id == "deadline")
    assert deadline.run_s >= 0.04  # it held its slot until the deadline passed

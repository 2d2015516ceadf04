"""Synthetic executors that do no real work: for tests, benchmarks and dry runs.

- :class:`NoopExecutor` walks the stages and succeeds at once.
- :class:`SleepExecutor` holds its slot for a while (``payload["sleep_s"]``
  or a default), like a task doing work.
- :class:`FaultExecutor` fails on purpose, as configured per task id or by
  the task's payload: infra errors for the first N attempts, an agent error,
  a timeout, or hanging until cancelled.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Literal

from megaflow.core.errors import AgentError, InfraError, MegaFlowTimeout
from megaflow.core.states import TaskState
from megaflow.core.tasks import TaskResult
from megaflow.scheduler.abstract import TaskContext, TaskExecutor
from megaflow.scheduler.records import trusted


class NoopExecutor(TaskExecutor):
    """Succeeds at once, reporting every stage."""

    async def run(self, ctx: TaskContext) -> TaskResult:
        ctx.stage(TaskState.STARTING)
        ctx.stage(TaskState.RUNNING)
        ctx.stage(TaskState.GRADING)
        return trusted(TaskResult, task_id=ctx.spec.id, success=True, reward=1.0)


class SleepExecutor(TaskExecutor):
    """Sleeps ``payload["sleep_s"]`` (or ``default_s``) seconds while RUNNING."""

    def __init__(self, default_s: float = 0.01) -> None:
        self.default_s = default_s
        self.started: list[str] = []
        self.finished: list[str] = []
        self.torn_down: list[str] = []

    async def run(self, ctx: TaskContext) -> TaskResult:
        self.started.append(ctx.spec.id)
        ctx.stage(TaskState.STARTING)
        try:
            ctx.stage(TaskState.RUNNING)
            await asyncio.sleep(float(ctx.spec.payload.get("sleep_s", self.default_s)))  # type: ignore[arg-type]
            ctx.stage(TaskState.GRADING)
        finally:
            self.torn_down.append(ctx.spec.id)
        self.finished.append(ctx.spec.id)
        return TaskResult(task_id=ctx.spec.id, success=True, reward=1.0)


Fault = Literal["infra", "agent", "timeout", "hang", "ok"]


@dataclass
class FaultPlan:
    """How one task misbehaves: ``infra_failures`` infra errors first, then ``then``."""

    infra_failures: int = 0
    then: Fault = "ok"
    sleep_s: float = 0.0


@dataclass
class FaultExecutor(TaskExecutor):
    """Fails on purpose. ``plans`` by task id; otherwise ``payload["fault"]`` may
    hold the fields of a :class:`FaultPlan`."""

    plans: dict[str, FaultPlan] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    torn_down: list[str] = field(default_factory=list)

    def plan_for(self, ctx: TaskContext) -> FaultPlan:
        plan = self.plans.get(ctx.spec.id)
        if plan is not None:
            return plan
        raw = ctx.spec.payload.get("fault")
        return FaultPlan(**raw) if isinstance(raw, dict) else FaultPlan()

    async def run(self, ctx: TaskContext) -> TaskResult:
        task_id = ctx.spec.id
        n = self.calls[task_id] = self.calls.get(task_id, 0) + 1
        plan = self.plan_for(ctx)
        ctx.stage(TaskState.STARTING)
        if n <= plan.infra_failures:
            raise InfraError(f"injected infra failure {n} of task {task_id}")
        try:
            ctx.stage(TaskState.RUNNING)
            if plan.sleep_s:
                await asyncio.sleep(plan.sleep_s)
            if plan.then == "agent":
                raise AgentError(f"injected agent failure of task {task_id}")
            if plan.then == "timeout":
                raise MegaFlowTimeout(f"injected timeout of task {task_id}")
            if plan.then == "hang":
                await asyncio.Event().wait()
            ctx.stage(TaskState.GRADING)
        finally:
            self.torn_down.append(task_id)
        return TaskResult(task_id=task_id, success=True, reward=1.0)

"""The task executor of a real run: sandbox -> agent -> grading -> storage.

The scheduler calls :meth:`AgentExecutor.run` once per attempt. Each attempt
takes a sandbox from the pool (STARTING), places the task's repository in it,
runs the agent against the model (RUNNING), grades the result in the same
sandbox (GRADING), and stores the trajectory, the patch and the grade report
in the artifact store. The sandbox goes back to the pool on every path,
including errors and cancellation, so none is leaked.

Tasks that carry a SWE-bench instance in their payload are prepared and
graded as such; any other task runs in an empty workspace and is not graded
(its type is ``synth``: a clean submission is its success).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

from megaflow.agent.abstract import Agent, error_kind, new_trajectory
from megaflow.core.errors import AgentError
from megaflow.core.states import TaskState
from megaflow.core.tasks import TaskResult, TaskSpec
from megaflow.core.trajectory import Trajectory
from megaflow.datasets.grading import GradeReport, grade
from megaflow.datasets.prepare import environment_spec, prepare_sandbox
from megaflow.datasets.tasks import instance_of
from megaflow.environment.abstract import EnvironmentSpec, Sandbox
from megaflow.environment.pool import SandboxPool
from megaflow.model.abstract import ModelClient
from megaflow.monitoring.run import JobMetrics
from megaflow.scheduler.abstract import TaskContext, TaskExecutor
from megaflow.storage.abstract import ArtifactStore


@dataclass
class Arm:
    """What runs the tasks of one run: its agent and its model client."""

    agent: Agent
    model: ModelClient


def artifact_prefix(task: TaskSpec, attempt: int) -> str:
    return f"runs/{task.run_id}/tasks/{task.id.replace(':', '_')}/attempt-{attempt}"


class AgentExecutor(TaskExecutor):
    def __init__(
        self,
        pool: SandboxPool,
        arms: dict[str, Arm],
        artifacts: ArtifactStore,
        base_spec: EnvironmentSpec,
        metrics: JobMetrics | None = None,
    ) -> None:
        self.pool = pool
        self.arms = arms
        self.artifacts = artifacts
        self.base_spec = base_spec
        self.metrics = metrics

    def _arm(self, task: TaskSpec) -> Arm:
        try:
            return self.arms[task.run_id]
        except KeyError:
            raise AgentError(f"no agent is configured for run {task.run_id!r}") from None

    async def run(self, ctx: TaskContext) -> TaskResult:
        task = ctx.spec
        arm = self._arm(task)
        swe = "instance_id" in task.payload
        instance = instance_of(task) if swe else None
        spec = environment_spec(instance, self.base_spec) if instance else self.base_spec
        deadline = task.timeouts.deadline_s
        ctx.stage(TaskState.STARTING)
        t0 = time.perf_counter()
        sandbox = await self.pool.acquire(
            spec, owner=task.id, task_deadline=time.time() + deadline if deadline else None
        )
        broken = True
        try:
            start_s = time.perf_counter() - t0
            if instance is not None:
                await prepare_sandbox(sandbox, instance)
            prepare_s = time.perf_counter() - t0 - start_s
            result = await self._attempt(ctx, arm, sandbox, start_s, prepare_s)
            broken = False
            return result
        except BaseException as exc:
            if self.metrics is not None:
                self.metrics.task_failed(task.run_id, error_kind(exc).value)
            raise
        finally:
            await asyncio.shield(self._release(sandbox, broken))

    async def _release(self, sandbox: Sandbox, broken: bool) -> None:
        await self.pool.release(sandbox, broken=broken)

    async def _attempt(
        self, ctx: TaskContext, arm: Arm, sandbox: Sandbox, start_s: float, prepare_s: float
    ) -> TaskResult:
        task = ctx.spec
        prefix = artifact_prefix(task, ctx.attempt)
        ctx.stage(TaskState.RUNNING)
        traj = new_trajectory(task, ctx.attempt)
        t1 = time.perf_counter()
        try:
            await arm.agent.run(task, sandbox, arm.model, traj)
        except BaseException as exc:
            # Keep what was recorded: a failed attempt's trajectory is evidence.
            traj.meta.setdefault("error_kind", error_kind(exc).value)
            await asyncio.shield(self._put_json(f"{prefix}/trajectory.json", traj))
            raise
        agent_s = time.perf_counter() - t1
        artifacts = {"trajectory": f"{prefix}/trajectory.json"}
        ctx.stage(TaskState.GRADING)
        t2 = time.perf_counter()
        report: GradeReport | None = None
        if "instance_id" in task.payload:
            # A grading problem (tests hang, the test patch does not apply) is
            # recorded in the report and leaves the task unresolved.
            report = await grade(sandbox, instance_of(task))
            await self.artifacts.put(f"{prefix}/patch.diff", report.model_patch.encode())
            await self._put_json(f"{prefix}/grade.json", report)
            artifacts["patch"] = f"{prefix}/patch.diff"
            artifacts["grade"] = f"{prefix}/grade.json"
        grade_s = time.perf_counter() - t2
        await self._put_json(f"{prefix}/trajectory.json", traj)
        success = report.resolved if report else traj.meta.get("exit_status") == "submitted"
        reward = report.reward if report else float(success)
        if self.metrics is not None:
            kind = str(traj.meta.get("task_type") or (task.type.value if task.type else "eval"))
            self.metrics.task_done(
                task.run_id, kind, start_s + prepare_s + agent_s + grade_s, success, reward
            )
            for call in traj.model_calls:
                self.metrics.model_call(
                    task.run_id, call.duration_s, call.prompt_tokens, call.completion_tokens
                )
        return TaskResult(
            task_id=task.id,
            success=success,
            reward=reward,
            metrics={
                "sandbox_start_s": start_s,
                "prepare_s": prepare_s,
                "agent_s": agent_s,
                "grade_s": grade_s,
                "steps": float(len(traj.model_calls)),
                "tokens": float(traj.tokens),
            },
            artifacts=artifacts,
            error=report.error if report else None,
        )

    async def _put_json(self, key: str, obj: Trajectory | GradeReport) -> None:
        await self.artifacts.put(key, json.dumps(obj.model_dump(mode="json")).encode())

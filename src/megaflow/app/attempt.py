"""The task executor of a real run: sandbox -> agent -> grading -> storage.

The scheduler calls :meth:`AgentExecutor.run` once per attempt. Each attempt
takes a sandbox from the pool (STARTING), places the task in it (a repository),
runs the agent against the model (RUNNING), then (GRADING) kills what the
agent left running, takes what is graded (for SWE-bench tasks, its patch
against the base commit), gives the agent's sandbox back, and grades it in a
second, fresh sandbox: nothing else the agent did reaches the grader. The
trajectory, what was graded and the grade report go to the artifact store.
Sandboxes go back to the pool on every path, including errors and
cancellation, so none is leaked.

Each run grades through its grader (``grading.type``, :mod:`megaflow.grading`):
it prepares the agent's sandbox, takes what is graded (after killing what the
agent left running) and grades it in a fresh sandbox or on the host; the
reward is :func:`~megaflow.grading.reward.reward_of` of its report. A task
the grader has nothing to grade with runs in the base sandbox and is not
graded (its type is ``synth``: a clean submission is its success). The arm's
:class:`~megaflow.agent.routing.TaskRouter` records each sample's type and
group in its trajectory and drops token data from ``eval`` and ``synth`` ones.

Every sample is counted. An agent that ends by a limit (steps, tokens,
time) is graded like any other. An agent that fails on its own
(:class:`AgentError`, such as too many malformed answers, or a
:class:`ModelError` answer) still has its patch taken and graded (the report
is kept as evidence), but its result has reward 0, ``success`` false and
``error_kind`` ``agent``: the attempt *returns* that result, so the task
ends SUCCEEDED (ran to the end and was graded) with reward 0, a stored
trajectory and its error; it is a sample the policy earned, not a lost one.
Infrastructure errors still raise (the scheduler retries them) and their
trajectory is kept as evidence.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from megaflow.agent.abstract import error_kind, new_trajectory
from megaflow.app.assembly import Arm, is_graded, parse_task
from megaflow.app.calibrations import Calibrations
from megaflow.app.disk_floor import DiskFloor, disk_error
from megaflow.core.errors import AgentError, SandboxError, StoreUnavailable, TransportError
from megaflow.core.states import TaskState
from megaflow.core.tasks import (
    ErrorKind,
    Outcome,
    TaskResult,
    TaskSpec,
    artifact_prefix,
    classify,
)
from megaflow.core.trajectory import Trajectory
from megaflow.datasets.prepare import environment_spec
from megaflow.environment.abstract import EnvironmentSpec, Sandbox
from megaflow.environment.pool import SandboxPool
from megaflow.grading.abstract import Grader, GradingAttempt, Report, Taken
from megaflow.grading.reward import reward_of
from megaflow.monitoring.run import JobMetrics
from megaflow.scheduler.abstract import TaskContext, TaskExecutor
from megaflow.storage.abstract import ArtifactStore


def sandbox_spec(
    task: TaskSpec, base: EnvironmentSpec, grader: Grader | None = None
) -> EnvironmentSpec:
    """The sandbox a task's attempt and its grading run in: the grader's, or (with
    no grader at hand, as for prefetching) its instance's image, if any."""
    if grader is not None:
        return grader.sandbox_spec(task, base) if grader.grades(task) else base
    instance = parse_task(task).instance
    return environment_spec(instance, base) if instance else base


class AgentExecutor(TaskExecutor):
    def __init__(
        self,
        pool: SandboxPool,
        arms: dict[str, Arm],
        artifacts: ArtifactStore,
        base_spec: EnvironmentSpec,
        metrics: JobMetrics | None = None,
        *,
        disk: DiskFloor | None = None,
        park_on_outage: bool = False,
    ) -> None:
        self.pool = pool
        self.arms = arms
        self.artifacts = artifacts
        self.base_spec = base_spec
        self.metrics = metrics
        self.disk = disk
        """Holds new attempts while the host's state folders are short of space."""
        self.park_on_outage = park_on_outage
        """A store gone past its deadline: wait to be stopped (the job is stopping and
        the attempt stays in flight for resume) rather than fail the attempt."""
        self._calibrations = Calibrations(artifacts)
        self._graders: dict[str, Grader] = {}

    def _arm(self, task: TaskSpec) -> Arm:
        try:
            return self.arms[task.run_id]
        except KeyError:
            raise AgentError(f"no agent is configured for run {task.run_id!r}") from None

    def _grader(self, task: TaskSpec, arm: Arm) -> Grader:
        """The grader of the task's run, built from its ``grading`` config once."""
        grader = self._graders.get(task.run_id)
        if grader is None:
            grader = self._graders[task.run_id] = arm.grading.build(self._calibrations, arm.model)
        return grader

    async def run(self, ctx: TaskContext) -> TaskResult:
        task = ctx.spec
        arm = self._arm(task)
        grader = self._grader(task, arm)
        spec = sandbox_spec(task, self.base_spec, grader)
        # An ungraded task (no instance, no verifier) runs in the base sandbox.
        grading = (
            grader.attempt(task, spec, lambda: self._sandbox(task, spec))
            if grader.grades(task)
            else None
        )
        try:
            async with contextlib.AsyncExitStack() as stack:
                if grading is not None:  # starts what runs beside the agent (calibration)
                    await stack.enter_async_context(grading)
                return await self._attempt(ctx, arm, spec, grading)
        except StoreUnavailable as exc:
            if self.park_on_outage:  # the job saw it too and stops this attempt
                await asyncio.Future()
            raise TransportError(str(exc)) from exc  # infra: retried once it is back
        except BaseException as exc:
            if self.metrics is not None:
                self.metrics.task_failed(task.run_id, error_kind(exc).value)
            raise

    async def _attempt(
        self, ctx: TaskContext, arm: Arm, spec: EnvironmentSpec, grading: GradingAttempt | None
    ) -> TaskResult:
        """The agent in its sandbox, then what it left taken and graded apart from it."""
        task = ctx.spec
        if self.disk is not None:
            await self.disk.room(task.id)
        since = time.monotonic()
        ctx.stage(TaskState.STARTING)
        t0 = time.perf_counter()
        async with self._sandbox(task, spec) as sandbox:
            start_s = time.perf_counter() - t0
            if grading is not None:
                await grading.prepare(sandbox)
            prepare_s = time.perf_counter() - t0 - start_s
            traj, agent_s, failure = await self._run_agent(ctx, arm, sandbox)
            ctx.stage(TaskState.GRADING)
            t2 = time.perf_counter()
            taken = None
            if grading is not None:  # kills what the agent left running, first
                taken = await grading.take(sandbox, traj)
                if disk_error(taken.error):
                    self._host_disk_check(since, f"{taken.error}; ")
        times = {"sandbox_start_s": start_s, "prepare_s": prepare_s, "agent_s": agent_s}
        report = None
        if grading is not None and taken is not None:
            report = await grading.grade(taken)
            times.update(grading.times)
        if failure is not None or (report is not None and not report.resolved):
            self._host_disk_check(since, "the sample did not come out resolved and ")
        times["grade_s"] = time.perf_counter() - t2
        return await self._finish(ctx, traj, report, taken, times, failure)

    def _host_disk_check(self, since: float, what: str) -> None:
        """A sample spoiled while the host's disk was full (since monotonic ``since``)
        is the host's failure (retried), not the agent's sample."""
        low = None if self.disk is None else self.disk.short_since(since)
        if low is not None:
            raise SandboxError(
                f"{what}the host's disk was full during the attempt ({low[0]} had "
                f"{low[1] / 2**20:.1f} MB free, below storage.outage.min_free_mb)"
            )

    @contextlib.asynccontextmanager
    async def _sandbox(self, task: TaskSpec, spec: EnvironmentSpec) -> AsyncIterator[Sandbox]:
        """A sandbox from the pool, given back on every path (broken unless the body ended)."""
        deadline = task.timeouts.deadline_s
        sandbox = await self.pool.acquire(
            spec, owner=task.id, task_deadline=time.time() + deadline if deadline else None
        )
        broken = True
        try:
            yield sandbox
            broken = False
        finally:
            await asyncio.shield(self.pool.release(sandbox, broken=broken))

    async def _run_agent(
        self, ctx: TaskContext, arm: Arm, sandbox: Sandbox
    ) -> tuple[Trajectory, float, Exception | None]:
        """The agent's episode, its time, and the agent's own failure if it had one."""
        task = ctx.spec
        ctx.stage(TaskState.RUNNING)
        traj = new_trajectory(task, ctx.attempt)
        t1 = time.perf_counter()
        try:
            await arm.agent.run(task, sandbox, arm.model, traj)
        except Exception as exc:
            if classify(exc) is Outcome.AGENT:
                arm.router.annotate(task, traj, graded=is_graded(task))
                return traj, time.perf_counter() - t1, exc
            await self._keep_evidence(ctx, arm, traj, exc)
            raise
        except BaseException as exc:
            await self._keep_evidence(ctx, arm, traj, exc)
            raise
        arm.router.annotate(task, traj, graded=is_graded(task))
        return traj, time.perf_counter() - t1, None

    async def _keep_evidence(
        self,
        ctx: TaskContext,
        arm: Arm,
        traj: Trajectory,
        exc: BaseException,
    ) -> None:
        """Keep what was recorded: a failed attempt's trajectory is evidence."""
        traj.meta.setdefault("error_kind", error_kind(exc).value)
        arm.router.annotate(ctx.spec, traj, graded=is_graded(ctx.spec))
        prefix = artifact_prefix(ctx.spec, ctx.attempt)
        await asyncio.shield(self._put_json(f"{prefix}/trajectory.json", traj))

    async def _finish(
        self,
        ctx: TaskContext,
        traj: Trajectory,
        report: Report | None,
        taken: Taken | None,
        times: dict[str, float],
        failure: Exception | None = None,
    ) -> TaskResult:
        task = ctx.spec
        prefix = artifact_prefix(task, ctx.attempt)
        artifacts = {"trajectory": f"{prefix}/trajectory.json"}
        if report is not None and taken is not None:
            name = taken.artifact.split(".")[0]  # patch, state or answer
            await self.artifacts.put(f"{prefix}/{taken.artifact}", taken.data)
            await self._put_json(f"{prefix}/grade.json", report)
            artifacts[name] = f"{prefix}/{taken.artifact}"
            artifacts["grade"] = f"{prefix}/grade.json"
        await self._put_json(f"{prefix}/trajectory.json", traj)
        success = report.resolved if report else traj.meta.get("exit_status") == "submitted"
        reward = reward_of(report) if report else float(success)
        error = report.error if report else None
        kind = ErrorKind.TAMPERED if report is not None and report.tampered else None
        if failure is not None:  # the agent's own failure: a sample with reward 0
            success, reward, error = False, 0.0, f"{type(failure).__name__}: {failure}"
            kind = ErrorKind.AGENT
        if self.metrics is not None:
            task_type = str(traj.meta["task_type"])
            total = sum(times[k] for k in ("sandbox_start_s", "prepare_s", "agent_s", "grade_s"))
            self.metrics.task_done(task.run_id, task_type, total, success, reward)
            for call in traj.model_calls:
                self.metrics.model_call(
                    task.run_id, call.duration_s, call.prompt_tokens, call.completion_tokens
                )
        return TaskResult(
            task_id=task.id,
            success=success,
            reward=reward,
            metrics={
                **times,
                "steps": float(len(traj.model_calls)),
                "tokens": float(traj.tokens),
            },
            artifacts=artifacts,
            error_kind=kind,
            error=error,
        )

    async def _put_json(self, key: str, obj: Trajectory | Report) -> None:
        # pydantic's own serializer: a third of the time of json.dumps(model_dump()),
        # which was a third of the event loop's time per episode (py-spy, 1,024 episodes)
        await self.artifacts.put(key, obj.model_dump_json().encode())

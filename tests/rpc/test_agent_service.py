"""One contract for task executors, in-process and through the Agent service."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from megaflow.core.errors import AgentError, AuthError, InfraError, MegaFlowTimeout
from megaflow.core.states import TaskState
from megaflow.core.tasks import TaskResult, TaskSpec
from megaflow.rpc.agent_service import AgentServicer, GrpcTaskExecutor
from megaflow.rpc.auth import generate_token
from megaflow.rpc.server import RpcServer
from megaflow.scheduler.abstract import TaskContext, TaskExecutor
from megaflow.scheduler.synthetic import FaultExecutor, FaultPlan


class BuggyExecutor(FaultExecutor):
    """Fails like code with a bug: a builtin exception, or an exception of its own."""

    async def run(self, ctx: TaskContext) -> TaskResult:
        if ctx.spec.id == "keyerror":
            raise KeyError("boom")
        if ctx.spec.id == "custom":
            raise PluginMisbehaved("the plug-in misbehaved")
        return await super().run(ctx)


class PluginMisbehaved(Exception):
    pass


@pytest.fixture
def faults() -> FaultExecutor:
    return BuggyExecutor(
        plans={
            "flaky": FaultPlan(infra_failures=1),
            "agent": FaultPlan(then="agent"),
            "slow": FaultPlan(then="timeout"),
            "hang": FaultPlan(then="hang"),
        }
    )


@pytest.fixture(params=["inprocess", "grpc"])
async def executor(
    request: pytest.FixtureRequest, faults: FaultExecutor, token: str
) -> AsyncIterator[TaskExecutor]:
    if request.param == "inprocess":
        yield faults
        return
    server = RpcServer(token, port=0)
    server.add(AgentServicer(faults).register)
    async with server:
        remote = GrpcTaskExecutor(server.target, token)
        await remote.start()
        try:
            yield remote
        finally:
            await remote.stop()


def context(task_id: str, stages: list[TaskState], attempt: int = 1) -> TaskContext:
    spec = TaskSpec(id=task_id, run_id="r1")
    return TaskContext(spec, attempt, "i1", "default", stages.append)


async def test_success_reports_every_stage_in_order(executor: TaskExecutor) -> None:
    stages: list[TaskState] = []
    result = await executor.run(context("ok", stages))
    assert (result.task_id, result.success, result.reward) == ("ok", True, 1.0)
    assert stages == [TaskState.STARTING, TaskState.RUNNING, TaskState.GRADING]


async def test_errors_keep_their_class(executor: TaskExecutor) -> None:
    stages: list[TaskState] = []
    with pytest.raises(InfraError, match="injected infra failure 1"):
        await executor.run(context("flaky", stages))
    assert (await executor.run(context("flaky", stages, attempt=2))).success
    with pytest.raises(AgentError, match="injected agent failure"):
        await executor.run(context("agent", []))
    with pytest.raises(MegaFlowTimeout, match="injected timeout"):
        await executor.run(context("slow", []))


async def test_unexpected_errors_are_final_not_infrastructure(executor: TaskExecutor) -> None:
    with pytest.raises(KeyError, match="boom"):
        await executor.run(context("keyerror", []))
    with pytest.raises(Exception, match="the plug-in misbehaved") as info:
        await executor.run(context("custom", []))
    assert not isinstance(info.value, InfraError)


async def test_cancellation_reaches_the_executor(
    executor: TaskExecutor, faults: FaultExecutor
) -> None:
    stages: list[TaskState] = []
    attempt = asyncio.create_task(executor.run(context("hang", stages)))
    for _ in range(500):
        if TaskState.RUNNING in stages:
            break
        await asyncio.sleep(0.01)
    assert stages == [TaskState.STARTING, TaskState.RUNNING]
    attempt.cancel()
    with pytest.raises(asyncio.CancelledError):
        await attempt
    for _ in range(500):  # the remote side learns of the cancellation asynchronously
        if "hang" in faults.torn_down:
            break
        await asyncio.sleep(0.01)
    assert faults.torn_down == ["hang"]


async def test_wrong_token_runs_nothing(faults: FaultExecutor, token: str) -> None:
    server = RpcServer(token, port=0)
    server.add(AgentServicer(faults).register)
    async with server:
        intruder = GrpcTaskExecutor(server.target, generate_token())
        try:
            with pytest.raises(AuthError):
                await intruder.run(context("ok", []))
        finally:
            await intruder.stop()
    assert faults.calls == {}

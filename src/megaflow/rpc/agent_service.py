"""The Agent service: a :class:`TaskExecutor` served over gRPC, and its client.

The scheduler runs each attempt through a ``TaskExecutor``. The app's agent
executor (sandbox, agent loop, grading) is one; :class:`AgentServicer`
serves any executor, and :class:`GrpcTaskExecutor` is an executor whose
attempts run in a remote Agent service. Stage changes stream back and are
reported to the scheduler as they happen; the attempt's error is raised
again as the same class (``InfraError`` stays retryable, ``AgentError``
final); cancelling the attempt cancels the call, and the remote executor
releases its sandbox before the call ends.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc

from megaflow.core.errors import TransportError
from megaflow.core.states import TaskState
from megaflow.core.tasks import TaskResult, TaskSpec
from megaflow.rpc.client import GrpcClient
from megaflow.rpc.gen import agent_pb2 as pb
from megaflow.rpc.gen import agent_pb2_grpc
from megaflow.rpc.status import streams_errors
from megaflow.scheduler.abstract import TaskContext, TaskExecutor

Ctx = Any  # grpc.aio.ServicerContext; grpc ships no type information


class AgentServicer:
    """Serves ``executor``; the caller starts and stops it."""

    def __init__(self, executor: TaskExecutor) -> None:
        self.executor = executor

    def register(self, server: grpc.aio.Server) -> None:
        agent_pb2_grpc.add_AgentServicer_to_server(self, server)  # type: ignore[no-untyped-call]

    @streams_errors
    async def RunTask(
        self, request: pb.RunTaskRequest, context: Ctx
    ) -> AsyncIterator[pb.AgentProgress]:
        spec = TaskSpec.model_validate_json(request.task_json)
        stages: asyncio.Queue[TaskState] = asyncio.Queue()
        ctx = TaskContext(
            spec=spec,
            attempt=request.attempt or 1,
            instance=request.instance or "agent-service",
            region=request.region or "default",
            _report=stages.put_nowait,
        )
        attempt = asyncio.ensure_future(self.executor.run(ctx))
        try:
            while not attempt.done():
                getter = asyncio.ensure_future(stages.get())
                await asyncio.wait({attempt, getter}, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    yield pb.AgentProgress(stage=getter.result().value)
                else:
                    getter.cancel()
            while not stages.empty():
                yield pb.AgentProgress(stage=stages.get_nowait().value)
            result = attempt.result()  # raises the attempt's error, mapped by streams_errors
            yield pb.AgentProgress(result_json=result.model_dump_json())
        finally:
            if not attempt.done():  # the client hung up or cancelled: release everything
                attempt.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await attempt


class GrpcTaskExecutor(GrpcClient, TaskExecutor):
    """Runs attempts in a remote Agent service."""

    service = "agent service"

    def new_stub(self, channel: grpc.aio.Channel) -> Any:
        return agent_pb2_grpc.AgentStub(channel)  # type: ignore[no-untyped-call]

    async def run(self, ctx: TaskContext) -> TaskResult:
        stub = await self.stub()
        req = pb.RunTaskRequest(
            task_json=ctx.spec.model_dump_json(),
            attempt=ctx.attempt,
            instance=ctx.instance,
            region=ctx.region,
        )
        call = stub.RunTask(req, metadata=self._md)
        what = f"RunTask {ctx.spec.id}"
        try:
            while (msg := await call.read()) is not grpc.aio.EOF:
                if msg.WhichOneof("event") == "stage":
                    ctx.stage(TaskState(msg.stage))
                else:
                    return TaskResult.model_validate_json(msg.result_json)
        except grpc.aio.AioRpcError as err:
            raise self.error(err, what) from None
        except asyncio.CancelledError:
            call.cancel()
            raise
        raise TransportError(f"{self.describe(what)}: the stream ended without a result")

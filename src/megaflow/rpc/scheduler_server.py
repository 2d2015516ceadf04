"""The Scheduler service over gRPC: wraps any :class:`ControlPlane`.

Core domain types travel as their canonical JSON and are validated by the
same pydantic models on arrival, so malformed input is INVALID_ARGUMENT
before the scheduler sees it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc

from megaflow.core.errors import InvalidInput
from megaflow.core.states import TaskState
from megaflow.core.tasks import RunSpec, TaskSpec
from megaflow.rpc.gen import scheduler_pb2 as pb
from megaflow.rpc.gen import scheduler_pb2_grpc
from megaflow.rpc.status import handles_errors, streams_errors
from megaflow.scheduler.control import ControlPlane, RunStatus

SUBSCRIBED = "subscribed"
Ctx = Any  # grpc.aio.ServicerContext; grpc ships no type information


def status_to_pb(status: RunStatus) -> pb.RunStatus:
    return pb.RunStatus(
        run_json=status.run.model_dump_json(),
        counts={s.value: n for s, n in status.counts.items()},
        done=status.done,
    )


def _tasks(raw: Any) -> list[TaskSpec]:
    return [TaskSpec.model_validate_json(t) for t in raw]


def _states(raw: Any) -> list[TaskState]:
    try:
        return [TaskState(s) for s in raw]
    except ValueError as exc:
        known = ", ".join(s.value for s in TaskState)
        raise InvalidInput(f"{exc}; states are {known}") from None


class SchedulerServicer:
    """Serves a control plane. Register with ``RpcServer.add(servicer.register)``."""

    def __init__(self, control: ControlPlane) -> None:
        self.control = control

    def register(self, server: grpc.aio.Server) -> None:
        scheduler_pb2_grpc.add_SchedulerServicer_to_server(self, server)  # type: ignore[no-untyped-call]

    @handles_errors
    async def SubmitRun(self, request: pb.SubmitRunRequest, context: Ctx) -> pb.SubmitReply:
        run = RunSpec.model_validate_json(request.run_json)
        n = await self.control.submit_run(run, _tasks(request.task_json))
        return pb.SubmitReply(run_id=run.id, accepted=n)

    @handles_errors
    async def SubmitTasks(self, request: pb.SubmitTasksRequest, context: Ctx) -> pb.SubmitReply:
        n = await self.control.submit_tasks(request.run_id, _tasks(request.task_json))
        return pb.SubmitReply(run_id=request.run_id, accepted=n)

    @handles_errors
    async def Cancel(self, request: pb.CancelRequest, context: Ctx) -> pb.CancelReply:
        task_id = request.task_id if request.HasField("task_id") else None
        return pb.CancelReply(cancelled=await self.control.cancel(request.run_id, task_id))

    @handles_errors
    async def GetRun(self, request: pb.RunRef, context: Ctx) -> pb.RunStatus:
        return status_to_pb(await self.control.get_run(request.run_id))

    @handles_errors
    async def ListRuns(self, request: pb.ListRunsRequest, context: Ctx) -> pb.RunList:
        return pb.RunList(runs=[status_to_pb(s) for s in await self.control.list_runs()])

    @handles_errors
    async def WaitRun(self, request: pb.RunRef, context: Ctx) -> pb.RunStatus:
        return status_to_pb(await self.control.wait(request.run_id))

    @handles_errors
    async def ListTasks(self, request: pb.ListTasksRequest, context: Ctx) -> pb.TaskList:
        records = await self.control.list_tasks(request.run_id, _states(request.states))
        return pb.TaskList(task_json=[r.model_dump_json() for r in records])

    @streams_errors
    async def WatchEvents(
        self, request: pb.WatchRequest, context: Ctx
    ) -> AsyncIterator[pb.EventMessage]:
        stream = await self.control.watch(request.run_id or None, list(request.kinds) or None)
        async with stream:
            yield pb.EventMessage(kind=SUBSCRIBED)
            async for event in stream:
                yield pb.EventMessage(kind=event.kind, event_json=event.model_dump_json())

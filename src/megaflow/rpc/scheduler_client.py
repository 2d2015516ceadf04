"""A :class:`ControlPlane` behind a remote Scheduler service.

::

    async with GrpcControlPlane("10.0.0.5:20051", token) as cp:
        await cp.submit_run(run, tasks)
        print((await cp.wait(run.id)).counts)
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Any

import grpc

from megaflow.core.errors import TransportError
from megaflow.core.events import Event, parse_event
from megaflow.core.states import TaskState
from megaflow.core.tasks import RunSpec, TaskRecord, TaskSpec
from megaflow.rpc.client import GrpcClient
from megaflow.rpc.gen import scheduler_pb2 as pb
from megaflow.rpc.gen import scheduler_pb2_grpc
from megaflow.rpc.scheduler_server import SUBSCRIBED
from megaflow.rpc.status import error_from
from megaflow.scheduler.control import ControlPlane, EventStream, RunStatus


def status_from_pb(msg: pb.RunStatus) -> RunStatus:
    return RunStatus(
        run=RunSpec.model_validate_json(msg.run_json),
        counts={TaskState(k): v for k, v in msg.counts.items()},
        done=msg.done,
    )


class _GrpcStream(EventStream):
    def __init__(self, call: Any, what: str) -> None:
        self._call = call
        self._what = what

    async def _events(self) -> AsyncIterator[Event]:
        try:
            while (msg := await self._call.read()) is not grpc.aio.EOF:
                yield parse_event(msg.event_json)
        except grpc.aio.AioRpcError as err:
            if err.code() != grpc.StatusCode.CANCELLED:
                raise error_from(err, self._what) from None

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._events()

    async def close(self) -> None:
        self._call.cancel()


class GrpcControlPlane(GrpcClient, ControlPlane):
    service = "scheduler service"

    def new_stub(self, channel: grpc.aio.Channel) -> Any:
        return scheduler_pb2_grpc.SchedulerStub(channel)  # type: ignore[no-untyped-call]

    async def submit_run(self, run: RunSpec, tasks: list[TaskSpec]) -> int:
        """Submit in batches under the message size limit; each batch is atomic."""
        first, *rest = self._batches(tasks)
        req = pb.SubmitRunRequest(run_json=run.model_dump_json(), task_json=first)
        reply = await self.call("SubmitRun", lambda s, md: s.SubmitRun(req, metadata=md))
        return int(reply.accepted) + await self._submit_batches(run.id, rest)

    async def submit_tasks(self, run_id: str, tasks: list[TaskSpec]) -> int:
        return await self._submit_batches(run_id, self._batches(tasks))

    def _batches(self, tasks: list[TaskSpec]) -> list[list[str]]:
        budget = self.max_message_bytes // 2
        out: list[list[str]] = [[]]
        size = 0
        for t in tasks:
            text = t.model_dump_json()
            n = len(text.encode()) + 16
            if out[-1] and size + n > budget:
                out.append([])
                size = 0
            out[-1].append(text)
            size += n
        return out

    async def _submit_batches(self, run_id: str, batches: list[list[str]]) -> int:
        accepted = 0
        for batch in batches:
            accepted += await self._submit_batch(
                pb.SubmitTasksRequest(run_id=run_id, task_json=batch)
            )
        return accepted

    async def _submit_batch(self, req: pb.SubmitTasksRequest) -> int:
        reply = await self.call("SubmitTasks", lambda s, md: s.SubmitTasks(req, metadata=md))
        return int(reply.accepted)

    async def cancel(self, run_id: str, task_id: str | None = None) -> int:
        req = pb.CancelRequest(run_id=run_id, task_id=task_id)
        reply = await self.call("Cancel", lambda s, md: s.Cancel(req, metadata=md))
        return int(reply.cancelled)

    async def get_run(self, run_id: str) -> RunStatus:
        ref = pb.RunRef(run_id=run_id)
        return status_from_pb(await self.call("GetRun", lambda s, md: s.GetRun(ref, metadata=md)))

    async def list_runs(self) -> list[RunStatus]:
        req = pb.ListRunsRequest()
        reply = await self.call("ListRuns", lambda s, md: s.ListRuns(req, metadata=md))
        return [status_from_pb(r) for r in reply.runs]

    async def wait(self, run_id: str) -> RunStatus:
        ref = pb.RunRef(run_id=run_id)
        reply = await self.call("WaitRun", lambda s, md: s.WaitRun(ref, metadata=md))
        return status_from_pb(reply)

    async def list_tasks(
        self, run_id: str, states: Iterable[TaskState] | None = None
    ) -> list[TaskRecord]:
        req = pb.ListTasksRequest(run_id=run_id, states=[s.value for s in states or ()])
        reply = await self.call("ListTasks", lambda s, md: s.ListTasks(req, metadata=md))
        return [TaskRecord.model_validate_json(t) for t in reply.task_json]

    async def watch(
        self, run_id: str | None = None, kinds: Iterable[str] | None = None
    ) -> EventStream:
        what = self.describe("WatchEvents")
        req = pb.WatchRequest(run_id=run_id or "", kinds=list(kinds or ()))
        call = (await self.stub()).WatchEvents(req, metadata=self._md)
        try:
            first = await call.read()
        except grpc.aio.AioRpcError as err:
            raise error_from(err, what) from None
        if first is grpc.aio.EOF or first.kind != SUBSCRIBED:
            call.cancel()
            raise TransportError(f"{what}: the stream did not confirm its subscription")
        return _GrpcStream(call, what)

"""One contract for the control plane, in-process and over the Scheduler service."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from megaflow.core.errors import AlreadyExists, AuthError, InvalidInput, NotFound
from megaflow.core.events import Event
from megaflow.core.states import TaskState
from megaflow.core.tasks import RunSpec, TaskSpec
from megaflow.rpc.auth import generate_token
from megaflow.rpc.gen import scheduler_pb2 as pb
from megaflow.rpc.gen import scheduler_pb2_grpc
from megaflow.rpc.scheduler_client import GrpcControlPlane
from megaflow.rpc.scheduler_server import SchedulerServicer
from megaflow.rpc.server import RpcServer
from megaflow.scheduler.config import SchedulerConfig
from megaflow.scheduler.control import ControlPlane, LocalControlPlane
from megaflow.scheduler.service import Scheduler
from megaflow.scheduler.synthetic import SleepExecutor
from megaflow.storage.factory import Stores
from megaflow.storage.local_artifacts import LocalArtifactStore
from megaflow.storage.memory_bus import MemoryEventBus
from megaflow.storage.memory_queue import MemoryTaskQueue
from megaflow.storage.sqlite import SqliteMetadataStore


def task(tid: str, run: str = "r1", sleep_s: float = 0.0) -> TaskSpec:
    return TaskSpec(id=tid, run_id=run, payload={"sleep_s": sleep_s})


@pytest.fixture
async def local_cp(tmp_path: Path) -> AsyncIterator[LocalControlPlane]:
    stores = Stores(
        metadata=SqliteMetadataStore(":memory:"),
        queue=MemoryTaskQueue(),
        events=MemoryEventBus(),
        artifacts=LocalArtifactStore(tmp_path / "artifacts"),
    )
    async with stores:
        sched = Scheduler(SchedulerConfig(max_concurrency=4), stores, SleepExecutor(0.0))
        async with sched:
            yield LocalControlPlane(sched)


@contextlib.asynccontextmanager
async def serve_scheduler(control: ControlPlane, token: str) -> AsyncIterator[RpcServer]:
    server = RpcServer(token, port=0)
    server.add(SchedulerServicer(control).register)
    async with server:
        yield server


@pytest.fixture(params=["inprocess", "grpc"])
async def cp(
    request: pytest.FixtureRequest, local_cp: LocalControlPlane, token: str
) -> AsyncIterator[ControlPlane]:
    if request.param == "inprocess":
        yield local_cp
        return
    async with (
        serve_scheduler(local_cp, token) as server,
        GrpcControlPlane(server.target, token) as client,
    ):
        yield client


async def test_submit_wait_get_and_list(cp: ControlPlane) -> None:
    assert await cp.submit_run(RunSpec(id="r1", name="first"), [task("a"), task("b")]) == 2
    assert await cp.submit_tasks("r1", [task("c")]) == 1
    status = await cp.wait("r1")
    assert status.done
    assert status.counts == {TaskState.SUCCEEDED: 3}
    assert status.run.name == "first"
    again = await cp.get_run("r1")
    assert (again.done, again.total) == (True, 3)
    records = await cp.list_tasks("r1")
    assert [r.id for r in records] == ["a", "b", "c"]
    assert all(r.state is TaskState.SUCCEEDED for r in records)
    assert await cp.list_tasks("r1", [TaskState.FAILED]) == []
    await cp.submit_run(RunSpec(id="r2", name="second"), [])
    runs = await cp.list_runs()
    assert [(s.run.id, s.total) for s in runs] == [("r1", 3), ("r2", 0)]


async def test_bad_submissions(cp: ControlPlane) -> None:
    with pytest.raises(NotFound, match="nope"):
        await cp.submit_tasks("nope", [task("x", run="nope")])
    with pytest.raises(InvalidInput, match="belongs to run"):
        await cp.submit_run(RunSpec(id="r1", name="r1"), [task("x", run="other")])
    await cp.submit_run(RunSpec(id="r1", name="r1"), [task("a")])
    with pytest.raises(AlreadyExists):
        await cp.submit_tasks("r1", [task("a")])
    with pytest.raises(NotFound):
        await cp.get_run("nope")
    with pytest.raises(NotFound):
        await cp.list_tasks("nope")
    await cp.wait("r1")


async def test_cancel_a_run(cp: ControlPlane) -> None:
    tasks = [task(f"t{i}", sleep_s=60) for i in range(6)]
    await cp.submit_run(RunSpec(id="r1", name="r1"), tasks)
    for _ in range(3000):  # until the scheduler has taken the tasks in
        if TaskState.RUNNING in (await cp.get_run("r1")).counts:
            break
        await asyncio.sleep(0.01)
    assert await cp.cancel("r1") == 6
    status = await cp.wait("r1")
    assert status.counts == {TaskState.CANCELLED: 6}
    with pytest.raises(NotFound):
        await cp.cancel("nope")


async def test_watch_streams_the_events_of_one_run(cp: ControlPlane) -> None:
    seen: list[Event] = []
    async with await cp.watch(run_id="r1") as stream:
        await cp.submit_run(RunSpec(id="other", name="other"), [task("o", run="other")])
        await cp.submit_run(RunSpec(id="r1", name="r1"), [task("a"), task("b")])

        async def collect() -> None:
            async for event in stream:
                seen.append(event)
                if sum(e.kind == "task_finished" for e in seen) == 2:
                    return

        await asyncio.wait_for(collect(), timeout=30)
    kinds = [e.kind for e in seen]
    assert kinds[0] == "task_submitted"
    finished = {getattr(e, "task_id", None) for e in seen if e.kind == "task_finished"}
    assert finished == {"a", "b"}
    assert {getattr(e, "run_id", None) for e in seen} == {"r1"}
    await cp.wait("other")


async def test_watch_filters_by_kind(cp: ControlPlane) -> None:
    async with await cp.watch(kinds=["task_finished"]) as stream:
        await cp.submit_run(RunSpec(id="r1", name="r1"), [task("a")])
        event = await asyncio.wait_for(anext(aiter(stream)), timeout=30)
    assert (event.kind, getattr(event, "task_id", None)) == ("task_finished", "a")


async def test_wrong_token_does_nothing(local_cp: LocalControlPlane, token: str) -> None:
    async with serve_scheduler(local_cp, token) as server:
        async with GrpcControlPlane(server.target, generate_token()) as intruder:
            with pytest.raises(AuthError):
                await intruder.submit_run(RunSpec(id="r1", name="r1"), [task("a")])
            with pytest.raises(AuthError):
                await intruder.watch()
        with pytest.raises(NotFound):
            await local_cp.get_run("r1")


async def test_malformed_json_and_states_are_invalid_argument(
    local_cp: LocalControlPlane, token: str
) -> None:
    md = (("authorization", f"Bearer {token}"),)
    async with (
        serve_scheduler(local_cp, token) as server,
        grpc.aio.insecure_channel(server.target) as channel,
    ):
        stub = scheduler_pb2_grpc.SchedulerStub(channel)  # type: ignore[no-untyped-call]
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.SubmitRun(pb.SubmitRunRequest(run_json='{"id": 5}'), metadata=md)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "RunSpec" in (info.value.details() or "")
        await local_cp.submit_run(RunSpec(id="r1", name="r1"), [])
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.ListTasks(pb.ListTasksRequest(run_id="r1", states=["done"]), metadata=md)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "states are" in (info.value.details() or "")


async def test_submissions_larger_than_a_message_go_in_batches(
    local_cp: LocalControlPlane, token: str
) -> None:
    big = "x" * 20_000
    tasks = [TaskSpec(id=f"t{i}", run_id="r1", payload={"blob": big}) for i in range(120)]
    server = RpcServer(token, port=0, max_message_bytes=1024 * 1024)
    server.add(SchedulerServicer(local_cp).register)
    async with server, GrpcControlPlane(server.target, token, max_message_bytes=1024 * 1024) as cp:
        assert await cp.submit_run(RunSpec(id="r1", name="r1"), tasks) == 120  # about 2.4 MB
        status = await cp.wait("r1")
        assert status.counts == {TaskState.SUCCEEDED: 120}
        assert len(await local_cp.list_tasks("r1")) == 120

"""The MongoDB metadata store under faults: which pymongo errors are waited out,
a killed server failing calls within the connect timeout (never a hang) and
answering again once restarted, and writes whose reply was lost not refused
on retry. On a real MongoDB-wire server (nx-27017, data in files)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path

import pytest
from pymongo.errors import (
    AutoReconnect,
    ConnectionFailure,
    DuplicateKeyError,
    NetworkTimeout,
    NotPrimaryError,
    OperationFailure,
    ServerSelectionTimeoutError,
    WaitQueueTimeoutError,
)

from megaflow.core.errors import InvalidTransition, StorageError
from megaflow.core.states import TaskState
from megaflow.core.tasks import RunSpec, TaskRecord, TaskSpec
from megaflow.storage.abstract import Transition
from megaflow.storage.mongo import MongoMetadataStore
from megaflow.storage.outage import Faults, Outage, transient
from megaflow.storage.retrying import RetryingMetadataStore
from tests.fixtures.servers import free_port
from tests.fixtures.sql_servers import _missing, _wait_tcp, find_nx27017
from tests.storage.conftest import make_tasks


def _wrapped(cause: BaseException) -> StorageError:
    """What the store's ``_storage_errors`` raises for a pymongo error."""
    try:
        raise StorageError(f"MongoDB call failed: {cause}") from cause
    except StorageError as exc:
        return exc


@pytest.mark.parametrize(
    "fault",
    [
        AutoReconnect("127.0.0.1:1: connection closed"),
        NetworkTimeout("127.0.0.1:1: timed out"),
        ServerSelectionTimeoutError("127.0.0.1:1: [Errno 111] Connection refused"),
        WaitQueueTimeoutError("timed out waiting for a connection from the pool"),
        ConnectionFailure("connection lost"),
        NotPrimaryError("node is shutting down"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_pymongo_connection_faults_are_transient(fault: Exception) -> None:
    assert transient(fault)
    assert transient(_wrapped(fault))


def test_pymongo_refusals_are_not_transient() -> None:
    assert not transient(_wrapped(DuplicateKeyError("E11000 duplicate key", code=11000)))
    assert not transient(_wrapped(OperationFailure("unknown operator: $foo", code=2)))


class Server:
    """nx-27017 on a fixed port with its data in files, to be SIGKILLed and restarted."""

    def __init__(self, binary: str, workdir: Path) -> None:
        self.binary, self.workdir, self.port = binary, workdir, free_port()
        (workdir / "data").mkdir()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return f"mongodb://127.0.0.1:{self.port}/?directConnection=true"

    def start(self) -> None:
        log = self.workdir / "server.log"
        cmd = [self.binary, "--data-dir", str(self.workdir / "data"), "--host", "127.0.0.1",
               "-p", str(self.port), "--log-file", str(self.workdir / "nx.log"),
               "--pid-file", str(self.workdir / "nx.pid")]  # fmt: skip
        with log.open("ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        _wait_tcp(self.port, self.proc, log)

    def sigkill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    binary = find_nx27017()
    if binary is None:
        _missing("nx-27017 not found; install the dev extra: pip install -e '.[dev]'")
    srv = Server(binary, tmp_path)
    srv.start()
    try:
        yield srv
    finally:
        srv.sigkill()


@pytest.fixture
async def mongo(server: Server) -> AsyncIterator[MongoMetadataStore]:
    async with MongoMetadataStore(server.uri, database="faults", connect_timeout_s=1) as md:
        await md.create_run(RunSpec(id="r", name="r"))
        yield md


@pytest.mark.services
async def test_a_killed_server_fails_calls_at_once_and_is_waited_out(
    server: Server, mongo: MongoMetadataStore
) -> None:
    tasks = make_tasks("r", 2)
    await mongo.add_tasks(tasks)
    server.sigkill()
    t0 = time.monotonic()
    with pytest.raises(StorageError) as err:  # not a hang: within the connect timeout
        await mongo.get_task(tasks[0].id)
    assert time.monotonic() - t0 < 5
    assert transient(err.value), err.value
    outage = Outage("metadata", "here", Faults(), deadline_s=30, base_s=0.1, max_s=0.5)
    store = RetryingMetadataStore(mongo, outage)
    waiting = asyncio.create_task(store.get_task(tasks[0].id))
    await asyncio.sleep(2)
    assert not waiting.done()  # waits the outage out, not failed
    server.start()  # the same data
    rec = await asyncio.wait_for(waiting, 20)
    assert rec.state is TaskState.QUEUED
    assert outage.faults_seen >= 1
    assert outage.down_since is None  # noted back
    assert len(await mongo.list_tasks("r")) == 2


class LostReplies(MongoMetadataStore):
    """Each write reaches the server, then its reply is lost once (AutoReconnect)."""

    lost: set[str]

    def _lose(self, what: str) -> None:
        if what not in self.lost:
            self.lost.add(what)
            raise StorageError(f"MongoDB {what} failed") from AutoReconnect("connection closed")

    async def create_run(self, run: RunSpec) -> None:
        await super().create_run(run)
        self._lose("create_run")

    async def add_tasks(self, tasks: Sequence[TaskSpec]) -> list[TaskRecord]:
        records = await super().add_tasks(tasks)
        self._lose("add_tasks")
        return records

    async def transition_many(self, transitions: Sequence[Transition]) -> None:
        await super().transition_many(transitions)
        self._lose("transition_many")


@pytest.mark.services
async def test_a_mongo_write_whose_reply_was_lost_is_not_refused_on_retry(server: Server) -> None:
    inner = LostReplies(server.uri, database="lost", connect_timeout_s=1)
    inner.lost = set()
    outage = Outage("metadata", "here", Faults(), deadline_s=5, base_s=0.01)
    async with RetryingMetadataStore(inner, outage) as store:
        await store.create_run(RunSpec(id="r", name="r"))  # done, reply lost: no AlreadyExists
        tasks = make_tasks("r", 2)
        records = await store.add_tasks(tasks)
        assert [r.id for r in records] == [t.id for t in tasks]
        batch = [Transition(tasks[0].id, TaskState.SCHEDULED),
                 Transition(tasks[0].id, TaskState.STARTING)]  # fmt: skip
        await store.transition_many(batch)  # the retry finds it done: no InvalidTransition
        rec = await store.get_task(tasks[0].id)
        assert (rec.state, rec.attempts) == (TaskState.STARTING, 1)  # counted once
        assert len(await store.list_tasks("r")) == 2
        assert inner.lost == {"create_run", "add_tasks", "transition_many"}
        with pytest.raises(InvalidTransition):  # a batch wrong for real is still refused
            await store.transition_many([Transition(tasks[1].id, TaskState.SUCCEEDED)])

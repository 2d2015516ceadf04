"""What only the MongoDB store has: transaction detection, the optimistic
fallback without transactions, schema version, indexes. Run against nx-27017.

Shared behaviour is in ``test_metadata_contract.py``.
"""

import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path

import pytest
from pymongo import AsyncMongoClient, MongoClient

import megaflow.storage.mongo_batch as mongo_batch
from megaflow.core.errors import AlreadyExists, InvalidTransition, StorageError
from megaflow.core.states import TaskState
from megaflow.core.tasks import RunSpec
from megaflow.storage.abstract import Transition
from megaflow.storage.config import StorageConfig
from megaflow.storage.factory import make_metadata_store
from megaflow.storage.mongo import MongoMetadataStore
from megaflow.storage.mongo_schema import SCHEMA_VERSION
from megaflow.storage.transition_plan import TaskChange, plan_transitions
from tests.fixtures.sql_servers import MongoServer, find_nx27017, free_port, running_nx27017
from tests.storage.conftest import make_tasks

pytestmark = pytest.mark.services
S = TaskState
Doc = dict[str, object]


@pytest.fixture
async def database(mongo_server: MongoServer) -> AsyncIterator[str]:
    name = f"m_{uuid.uuid4().hex[:12]}"
    yield name
    client: AsyncMongoClient[Doc] = AsyncMongoClient(mongo_server.uri)
    await client.drop_database(name)
    await client.close()


async def test_nx27017_runs_without_transactions_and_has_the_indexes(
    mongo_server: MongoServer, database: str
) -> None:
    async with MongoMetadataStore(mongo_server.uri, database=database) as store:
        # nx-27017 reports a standalone server, where MongoDB has no transactions
        assert store.uses_transactions is False
        assert await store.schema_version() == SCHEMA_VERSION
    client: AsyncMongoClient[Doc] = AsyncMongoClient(mongo_server.uri)
    try:
        info = await client[database]["tasks"].index_information()
    finally:
        await client.close()
    keys = {tuple(k for k, _ in spec["key"]) for spec in info.values()}
    assert {("run_id", "state"), ("state", "seq"), ("seq",)} <= keys


async def test_a_concurrent_change_undoes_the_whole_batch(
    mongo_server: MongoServer, database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without transactions: another scheduler changes a task between the
    batch's read and its write. The tasks already written are put back, the
    other scheduler's change stays, and the batch fails."""

    def plan_then_interfere(
        transitions: Sequence[Transition], current: Mapping[str, TaskState]
    ) -> list[TaskChange]:
        changes = plan_transitions(transitions, current)
        with MongoClient(mongo_server.uri) as other:
            other[database]["tasks"].update_one(
                {"_id": "r1/t2"}, {"$set": {"state": "cancelled"}, "$inc": {"rev": 1}}
            )
        return changes

    async with MongoMetadataStore(mongo_server.uri, database=database) as store:
        await store.create_run(RunSpec(id="r1"))
        await store.add_tasks(make_tasks("r1", 4))
        await store.transition("r1/t3", S.SCHEDULED, error="kept")
        monkeypatch.setattr(mongo_batch, "plan_transitions", plan_then_interfere)
        batch = [Transition(f"r1/t{i}", S.SCHEDULED) for i in range(3)]
        with pytest.raises(InvalidTransition, match="1 of 4 tasks changed"):
            await store.transition_many([*batch, Transition("r1/t3", S.STARTING, error="new")])
        monkeypatch.undo()
        got = [(r.state, r.attempts, r.error) for r in await store.list_tasks("r1")]
        assert got == [
            (S.QUEUED, 0, None),
            (S.QUEUED, 0, None),
            (S.CANCELLED, 0, None),
            (S.SCHEDULED, 1, "kept"),
        ]
        # the undone tasks are usable again
        await store.transition_many([Transition("r1/t0", S.SCHEDULED, expect=S.QUEUED)])
        assert (await store.get_task("r1/t0")).attempts == 1


async def test_a_concurrent_insert_removes_the_whole_submission(
    mongo_server: MongoServer, database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without transactions: another writer inserts one of the ids between the
    duplicate check and the insert. What this submission inserted is removed."""
    check = MongoMetadataStore._refuse_existing
    calls = 0

    async def check_then_interfere(self: MongoMetadataStore, ids: list[str], s: None) -> None:
        nonlocal calls
        await check(self, ids, s)
        calls += 1
        if calls == 1:
            with MongoClient(mongo_server.uri) as other:
                other[database]["tasks"].insert_one({"_id": "r1/u2", "seq": 10**9})

    async with MongoMetadataStore(mongo_server.uri, database=database) as store:
        await store.create_run(RunSpec(id="r1"))
        await store.add_tasks(make_tasks("r1", 1))
        monkeypatch.setattr(MongoMetadataStore, "_refuse_existing", check_then_interfere)
        with pytest.raises(AlreadyExists, match="r1/u2"):
            await store.add_tasks(make_tasks("r1", 4, prefix="u"))
        monkeypatch.undo()
        client: AsyncMongoClient[Doc] = AsyncMongoClient(mongo_server.uri)
        try:
            ids = [d["_id"] async for d in client[database]["tasks"].find({}, {"_id": 1})]
        finally:
            await client.close()
        assert sorted(ids) == ["r1/t0", "r1/u2"]


async def test_forced_transactions_roll_back_a_failed_submission(
    mongo_server: MongoServer, database: str
) -> None:
    """``transactions="on"`` runs batches through ``with_transaction``; nx-27017
    accepts that for a single writer (it does not isolate concurrent ones)."""
    async with MongoMetadataStore(mongo_server.uri, database=database, transactions="on") as store:
        assert store.uses_transactions is True
        await store.create_run(RunSpec(id="r1"))
        await store.add_tasks(make_tasks("r1", 2))
        await store.transition_many([Transition("r1/t0", S.SCHEDULED)])
        with pytest.raises(InvalidTransition):
            await store.transition_many(
                [Transition("r1/t1", S.SCHEDULED), Transition("r1/t0", S.QUEUED)]
            )
        assert [(r.state, r.attempts) for r in await store.list_tasks("r1")] == [
            (S.SCHEDULED, 1),
            (S.QUEUED, 0),
        ]


async def test_newer_schema_is_refused(mongo_server: MongoServer, database: str) -> None:
    async with MongoMetadataStore(mongo_server.uri, database=database):
        pass
    client: AsyncMongoClient[Doc] = AsyncMongoClient(mongo_server.uri)
    try:
        await client[database]["meta"].update_one(
            {"_id": "schema"}, {"$set": {"version": SCHEMA_VERSION + 1}}
        )
    finally:
        await client.close()
    with pytest.raises(StorageError, match="newer than this MegaFlow"):
        await MongoMetadataStore(mongo_server.uri, database=database).start()


async def test_unreachable_server_is_a_storage_error() -> None:
    uri = f"mongodb://127.0.0.1:{free_port()}/?directConnection=true"
    with pytest.raises(StorageError, match="cannot use MongoDB"):
        await MongoMetadataStore(uri, connect_timeout_s=0.5).start()


async def test_built_from_config(mongo_server: MongoServer, database: str) -> None:
    cfg = StorageConfig.model_validate(
        {"metadata": {"type": "mongo", "uri": mongo_server.uri, "database": database}}
    )
    store = make_metadata_store(cfg.metadata)
    assert isinstance(store, MongoMetadataStore)
    async with store:
        await store.create_run(RunSpec(id="r1"))
        assert [r.id for r in await store.list_runs()] == ["r1"]


async def test_a_lost_server_is_a_storage_error(mongo_server: MongoServer, tmp_path: Path) -> None:
    binary = find_nx27017()
    assert binary is not None  # mongo_server has found it already
    with running_nx27017(binary, tmp_path) as private:
        store = MongoMetadataStore(private.uri, database="gone", connect_timeout_s=0.5)
        await store.start()
        await store.create_run(RunSpec(id="r1"))
    try:
        with pytest.raises(StorageError, match="list_runs failed"):
            await store.list_runs()
    finally:
        await store.stop()

"""What only the PostgreSQL store has: schema migrations, row locks, the pool.

Shared behaviour is in ``test_metadata_contract.py``.
"""

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import psycopg
import pytest
from psycopg import sql

from megaflow.core.errors import InvalidTransition, StorageError
from megaflow.core.states import TaskState
from megaflow.core.tasks import RunSpec
from megaflow.storage.abstract import Transition
from megaflow.storage.config import StorageConfig
from megaflow.storage.factory import make_metadata_store
from megaflow.storage.postgres import PostgresMetadataStore
from megaflow.storage.postgres_schema import MIGRATIONS, SCHEMA_VERSION, migrate
from tests.fixtures.sql_servers import PostgresServer, free_port
from tests.storage.conftest import make_tasks

pytestmark = pytest.mark.services
S = TaskState


@dataclass
class Schema:
    dsn: str
    name: str

    async def connect(self) -> psycopg.AsyncConnection[tuple[object, ...]]:
        conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
        await conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.name)))
        return conn

    async def fetch(self, query: str, *args: object) -> list[tuple[object, ...]]:
        async with await self.connect() as conn:
            cur = await conn.execute(query.encode(), args)
            return await cur.fetchall()


@pytest.fixture
async def schema(postgres_server: PostgresServer) -> AsyncIterator[Schema]:
    s = Schema(postgres_server.dsn, f"m_{uuid.uuid4().hex[:12]}")
    yield s
    async with await psycopg.AsyncConnection.connect(s.dsn, autocommit=True) as conn:
        await conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(s.name))
        )


async def test_migrates_an_old_schema(schema: Schema) -> None:
    async with await schema.connect() as conn:
        assert await migrate(conn, schema.name, target=1) == 0
        await conn.execute(
            "INSERT INTO runs VALUES ('r', 'n', 1.0, %s)", (RunSpec(id="r").model_dump_json(),)
        )
    async with PostgresMetadataStore(schema.dsn, schema=schema.name) as store:
        assert await store.schema_version() == SCHEMA_VERSION == len(MIGRATIONS)
        assert (await store.get_run("r")).id == "r"
    indexes = await schema.fetch(
        "SELECT indexname FROM pg_indexes WHERE schemaname = %s", schema.name
    )
    assert ("tasks_state_seq",) in indexes
    assert await schema.fetch("SELECT version FROM schema_version ORDER BY version") == [
        (v,) for v in range(1, SCHEMA_VERSION + 1)
    ]


async def test_newer_schema_is_refused(schema: Schema) -> None:
    async with PostgresMetadataStore(schema.dsn, schema=schema.name):
        pass
    async with await schema.connect() as conn:
        await conn.execute(
            "INSERT INTO schema_version (version) VALUES (%s)", (SCHEMA_VERSION + 1,)
        )
    with pytest.raises(StorageError, match="newer than this MegaFlow"):
        await PostgresMetadataStore(schema.dsn, schema=schema.name).start()


async def test_stores_starting_together_migrate_once(schema: Schema) -> None:
    stores = [PostgresMetadataStore(schema.dsn, schema=schema.name) for _ in range(3)]
    try:
        await asyncio.gather(*(s.start() for s in stores))
        assert [await s.schema_version() for s in stores] == [SCHEMA_VERSION] * 3
    finally:
        await asyncio.gather(*(s.stop() for s in stores))
    rows = await schema.fetch("SELECT version FROM schema_version")
    assert len(rows) == SCHEMA_VERSION


async def test_a_locked_task_waits_and_the_later_writer_sees_the_change(schema: Schema) -> None:
    """``transition_many`` takes row locks: a batch that meets a task locked by
    another transaction waits for it, then judges the state that transaction
    left, instead of overwriting it (no lost update)."""
    async with PostgresMetadataStore(schema.dsn, schema=schema.name) as store:
        await store.create_run(RunSpec(id="r1"))
        await store.add_tasks(make_tasks("r1", 2))
        async with await schema.connect() as other:
            async with other.transaction():
                await other.execute("SELECT 1 FROM tasks WHERE id = 'r1/t1' FOR UPDATE")
                batch = asyncio.create_task(
                    store.transition_many(
                        [Transition("r1/t0", S.SCHEDULED), Transition("r1/t1", S.SCHEDULED)]
                    )
                )
                await asyncio.sleep(0.3)
                assert not batch.done()
                await other.execute("UPDATE tasks SET state = 'cancelled' WHERE id = 'r1/t1'")
            with pytest.raises(InvalidTransition, match="cancelled -> scheduled"):
                await batch
        assert [(r.state, r.attempts) for r in await store.list_tasks("r1")] == [
            (S.QUEUED, 0),
            (S.CANCELLED, 0),
        ]


async def test_large_batches(schema: Schema) -> None:
    async with PostgresMetadataStore(schema.dsn, schema=schema.name) as store:
        await store.create_run(RunSpec(id="r1"))
        recs = await store.add_tasks(make_tasks("r1", 3000))
        assert [r.seq for r in recs] == list(range(1, 3001))
        ids = [r.id for r in recs]
        await store.transition_many(
            [Transition(i, S.SCHEDULED) for i in ids] + [Transition(i, S.STARTING) for i in ids]
        )
        assert await store.count_by_state("r1") == {S.STARTING: 3000}


async def test_unreachable_server_is_a_storage_error_without_the_password() -> None:
    dsn = f"postgresql://megaflow:s3cret@127.0.0.1:{free_port()}/postgres"
    with pytest.raises(StorageError, match="cannot connect") as info:
        await PostgresMetadataStore(dsn, connect_timeout_s=1).start()
    assert "s3cret" not in str(info.value)


async def test_built_from_config(schema: Schema) -> None:
    cfg = StorageConfig.model_validate(
        {"metadata": {"type": "postgres", "dsn": schema.dsn, "db_schema": schema.name}}
    )
    store = make_metadata_store(cfg.metadata)
    assert isinstance(store, PostgresMetadataStore)
    async with store:
        await store.create_run(RunSpec(id="r1"))
    assert await schema.fetch("SELECT id FROM runs") == [("r1",)]


async def test_a_lost_connection_is_a_storage_error_and_the_pool_recovers(schema: Schema) -> None:
    async with PostgresMetadataStore(
        schema.dsn, schema=schema.name, min_connections=1, max_connections=1
    ) as store:
        await store.create_run(RunSpec(id="r1"))
        killed = await schema.fetch(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            f"megaflow-{schema.name}",
        )
        assert killed == [(True,)]
        with pytest.raises(StorageError, match="connection lost"):
            await store.list_runs()
        assert [r.id for r in await store.list_runs()] == ["r1"]

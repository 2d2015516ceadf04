import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from megaflow.core.tasks import RunSpec, TaskSpec
from megaflow.storage.abstract import MetadataStore
from megaflow.storage.sqlite import SqliteMetadataStore


def make_tasks(run_id: str, n: int, prefix: str = "t") -> list[TaskSpec]:
    return [TaskSpec(id=f"{run_id}/{prefix}{i}", run_id=run_id, priority=i % 3) for i in range(n)]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteMetadataStore]:
    async with SqliteMetadataStore(tmp_path / "meta.db") as s:
        await s.create_run(RunSpec(id="r1", name="one"))
        yield s


@dataclass
class Backend:
    name: str
    open: Callable[[], MetadataStore]
    """A new, not yet started store on this test's database."""


@pytest.fixture(
    params=[
        "sqlite",
        "memory",
        pytest.param("postgres", marks=pytest.mark.services),
        pytest.param("mongo", marks=pytest.mark.services),
    ]
)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    name = request.param
    if name == "sqlite":
        from megaflow.storage.sqlite import SqliteMetadataStore

        yield Backend(name, lambda: SqliteMetadataStore(tmp_path / "meta.db"))
    elif name == "memory":
        from megaflow.storage.memory_metadata import MemoryDatabase, MemoryMetadataStore

        db = MemoryDatabase()  # two stores opened on it share it, as two on one file do
        yield Backend(name, lambda: MemoryMetadataStore(db))
    elif name == "postgres":
        import psycopg
        from psycopg import sql

        from megaflow.storage.postgres import PostgresMetadataStore

        dsn = request.getfixturevalue("postgres_server").dsn
        schema = f"t_{uuid.uuid4().hex[:12]}"
        yield Backend(name, lambda: PostgresMetadataStore(dsn, schema=schema))
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            )
    else:
        from pymongo import AsyncMongoClient

        from megaflow.storage.mongo import MongoMetadataStore

        uri = request.getfixturevalue("mongo_server").uri
        database = f"t_{uuid.uuid4().hex[:12]}"
        yield Backend(name, lambda: MongoMetadataStore(uri, database=database))
        client: AsyncMongoClient[dict[str, object]] = AsyncMongoClient(uri)
        await client.drop_database(database)
        await client.close()

"""Versioned schema of the PostgreSQL metadata store.

Each entry of :data:`MIGRATIONS` moves the schema one version up. It is
applied once, in order, in its own transaction together with a row in the
``schema_version`` table (PostgreSQL DDL is transactional, so a failed
migration leaves nothing behind). A transaction-level advisory lock
serialises stores that start at the same time against one database. Never
edit a released migration: append a new one.
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection, sql

from megaflow.core.errors import StorageError

MIGRATIONS: list[str] = [
    # 1: runs, tasks, attempts, results, and the arrival counter
    """
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        spec TEXT NOT NULL
    );
    CREATE TABLE tasks (
        id TEXT PRIMARY KEY,
        run_id TEXT NOT NULL,
        seq BIGINT NOT NULL UNIQUE,
        state TEXT NOT NULL,
        priority INTEGER NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        preemptions INTEGER NOT NULL DEFAULT 0,
        updated_at DOUBLE PRECISION NOT NULL,
        error TEXT,
        spec TEXT NOT NULL
    );
    CREATE INDEX tasks_run_state ON tasks (run_id, state);
    CREATE TABLE attempts (
        task_id TEXT NOT NULL,
        number INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (task_id, number)
    );
    CREATE TABLE results (
        task_id TEXT PRIMARY KEY,
        run_id TEXT NOT NULL,
        success BOOLEAN NOT NULL,
        reward DOUBLE PRECISION NOT NULL,
        body TEXT NOT NULL
    );
    CREATE TABLE counters (
        name TEXT PRIMARY KEY,
        value BIGINT NOT NULL
    );
    INSERT INTO counters (name, value) VALUES ('task_seq', 0);
    """,
    # 2: queries by state alone (recovery, status) and results by run
    """
    CREATE INDEX tasks_state_seq ON tasks (state, seq);
    CREATE INDEX results_run ON results (run_id);
    """,
    # 3: the driver lease of each run (megaflow.storage.lease)
    """
    CREATE TABLE leases (
        run_id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL
    );
    """,
]

SCHEMA_VERSION = len(MIGRATIONS)

# Any constant works; it only has to be the same for every MegaFlow process.
_MIGRATION_LOCK = 0x6D656761


async def current_version(conn: AsyncConnection[Any]) -> int:
    """The schema version of the connection's search path; 0 when empty."""
    cur = await conn.execute("SELECT to_regclass('schema_version') IS NOT NULL")
    row = await cur.fetchone()
    if row is None or not row[0]:
        return 0
    cur = await conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_version")
    row = await cur.fetchone()
    return int(row[0]) if row else 0


async def migrate(conn: AsyncConnection[Any], schema: str, target: int = SCHEMA_VERSION) -> int:
    """Bring ``schema`` up to ``target``; returns the version it started from.

    ``conn`` must not be in a transaction; it is left outside one.
    """
    if target > SCHEMA_VERSION:
        raise ValueError(f"target {target} is beyond the last migration {SCHEMA_VERSION}")
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        await conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version ("
            " version INTEGER PRIMARY KEY,"
            " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        start = await current_version(conn)
    if start > SCHEMA_VERSION:
        raise StorageError(
            f"database schema {schema!r} is at version {start}, newer than this MegaFlow "
            f"understands ({SCHEMA_VERSION}); upgrade MegaFlow"
        )
    for version in range(start + 1, target + 1):
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            if await current_version(conn) >= version:
                continue  # another process applied it meanwhile
            for statement in MIGRATIONS[version - 1].split(";"):
                if statement.strip():
                    await conn.execute(statement.encode())
            await conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (version,))
    return start

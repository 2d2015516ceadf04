"""Versioned schema of the SQLite metadata store.

Each entry of :data:`MIGRATIONS` moves the schema one version up and is
applied once, in order, inside a transaction; ``PRAGMA user_version`` holds
the version reached. Never edit a released migration: append a new one.
"""

from __future__ import annotations

import sqlite3

from megaflow.core.errors import StorageError

MIGRATIONS: list[str] = [
    # 1: runs, tasks, attempts, results
    """
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        created_at REAL NOT NULL,
        spec TEXT NOT NULL
    );
    CREATE TABLE tasks (
        id TEXT PRIMARY KEY,
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        state TEXT NOT NULL,
        priority INTEGER NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        preemptions INTEGER NOT NULL DEFAULT 0,
        updated_at REAL NOT NULL,
        error TEXT,
        spec TEXT NOT NULL
    );
    CREATE INDEX tasks_run_state ON tasks(run_id, state);
    CREATE TABLE attempts (
        task_id TEXT NOT NULL,
        number INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (task_id, number)
    );
    CREATE TABLE results (
        task_id TEXT PRIMARY KEY,
        run_id TEXT NOT NULL,
        success INTEGER NOT NULL,
        reward REAL NOT NULL,
        body TEXT NOT NULL
    );
    """,
    # 2: queries by state alone (recovery, status) and results by run
    """
    CREATE INDEX tasks_state_seq ON tasks(state, seq);
    CREATE INDEX results_run ON results(run_id);
    """,
    # 3: the driver lease of each run (megaflow.storage.lease)
    """
    CREATE TABLE leases (
        run_id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        expires_at REAL NOT NULL
    );
    """,
]

SCHEMA_VERSION = len(MIGRATIONS)


def migrate(conn: sqlite3.Connection, target: int = SCHEMA_VERSION) -> int:
    """Bring ``conn`` up to ``target``; returns the version it started from."""
    # The version is read inside the write transaction, so two processes
    # opening a fresh file at once migrate it exactly once between them.
    conn.execute("BEGIN IMMEDIATE")
    try:
        (current,) = conn.execute("PRAGMA user_version").fetchone()
        if current > SCHEMA_VERSION:
            raise StorageError(
                f"database schema version {current} is newer than this MegaFlow "
                f"understands ({SCHEMA_VERSION}); upgrade MegaFlow"
            )
        for version in range(current + 1, target + 1):
            for statement in MIGRATIONS[version - 1].split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {version}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return int(current)

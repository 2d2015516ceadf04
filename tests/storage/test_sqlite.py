"""What only the SQLite store has: WAL mode and its file-schema migrations.

The behaviour every metadata store shares is tested once for all backends in
``test_metadata_contract.py``.
"""

import sqlite3
from pathlib import Path

import pytest

from megaflow.core.errors import StorageError
from megaflow.core.tasks import RunSpec
from megaflow.storage.sqlite import SqliteMetadataStore
from megaflow.storage.sqlite_schema import MIGRATIONS, SCHEMA_VERSION, migrate


async def test_wal_mode_and_schema_version(store: SqliteMetadataStore) -> None:
    assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.schema_version == SCHEMA_VERSION == len(MIGRATIONS)


async def test_migrates_an_old_database(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, target=1)
    conn.execute("INSERT INTO runs VALUES ('r', 'n', 1.0, ?)", (RunSpec(id="r").model_dump_json(),))
    conn.close()
    async with SqliteMetadataStore(path) as s:
        assert s.schema_version == SCHEMA_VERSION
        assert (await s.get_run("r")).id == "r"
        indexes = {r[0] for r in s.conn.execute("SELECT name FROM sqlite_master")}
        assert "tasks_state_seq" in indexes


async def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StorageError, match="newer than this MegaFlow"):
        await SqliteMetadataStore(path).start()


def test_processes_opening_a_fresh_file_at_once_migrate_it_once(tmp_path: Path) -> None:
    import subprocess
    import sys

    db = tmp_path / "fresh.db"
    code = (
        "import asyncio, sys\n"
        "from megaflow.storage.sqlite import SqliteMetadataStore\n"
        "async def go():\n"
        "    async with SqliteMetadataStore(sys.argv[1]) as s:\n"
        "        print(s.schema_version)\n"
        "asyncio.run(go())\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(db)], stdout=subprocess.PIPE, text=True)
        for _ in range(6)
    ]
    outs = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0] * 6
    assert outs == [str(SCHEMA_VERSION)] * 6

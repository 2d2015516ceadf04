"""`status` and `top` tell whether a run on a server store still has a driver, from
its driver lease (a SQLite run is asked through its lock file)."""

from __future__ import annotations

import socket
from pathlib import Path

from megaflow.cli.status_cmd import driver_state
from megaflow.core.tasks import RunSpec
from megaflow.storage.config import PostgresMetadataConfig
from megaflow.storage.sqlite import SqliteMetadataStore

SERVER = PostgresMetadataConfig(dsn="postgresql://u@db.example:5432/megaflow")
"""A server store's config: no lock file beside it, so only the lease can tell."""


async def test_a_server_stores_run_is_alive_while_its_lease_lasts(tmp_path: Path) -> None:
    store = SqliteMetadataStore(tmp_path / "m.db")
    await store.start()
    try:
        await store.create_run(RunSpec(id="r1"))
        assert await driver_state(store, SERVER, "r1", 3) == ""  # no lease: cannot tell
        await store.claim_lease("r1", "other-host:41:ab", 60.0)
        assert await driver_state(store, SERVER, "r1", 3) == "alive"
        assert await driver_state(store, SERVER, "r1-control", 3) == "alive"  # same job
        assert await driver_state(store, SERVER, "r1", 0) == ""  # nothing left to drive
        await store.claim_lease("r1", "other-host:41:ab", -1.0)  # the lease ended
        assert await driver_state(store, SERVER, "r1", 3) == "gone"
        dead = f"{socket.gethostname()}:999999999:cd"  # a process of this host, gone
        await store.claim_lease("r1", dead, 60.0)
        assert await driver_state(store, SERVER, "r1", 3) == "gone"
    finally:
        await store.stop()

"""The MongoDB metadata store's indexes and schema version.

Tasks are indexed by ``(run_id, state)``, ``(state, seq)`` and unique
``seq``; results by ``(run_id, seq)``; attempts unique by ``(task_id,
number)``. The ``meta`` collection's ``schema`` document holds the version
reached; a database newer than this code is refused. Every step is
idempotent, so stores starting together on one database prepare it safely.
"""

from __future__ import annotations

from typing import Any

from pymongo import ASCENDING
from pymongo.asynchronous.database import AsyncDatabase

from megaflow.core.errors import StorageError

SCHEMA_VERSION = 1


async def prepare(db: AsyncDatabase[dict[str, Any]]) -> None:
    """Check the schema version, create the indexes and the ``seq`` counter."""
    meta = db["meta"]
    found = await meta.find_one({"_id": "schema"})
    if found is not None and found["version"] > SCHEMA_VERSION:
        raise StorageError(
            f"database {db.name!r} has schema version {found['version']}, newer than "
            f"this MegaFlow understands ({SCHEMA_VERSION}); upgrade MegaFlow"
        )
    tasks = db["tasks"]
    await tasks.create_index([("run_id", ASCENDING), ("state", ASCENDING)])
    await tasks.create_index([("state", ASCENDING), ("seq", ASCENDING)])
    await tasks.create_index("seq", unique=True)
    await db["results"].create_index([("run_id", ASCENDING), ("seq", ASCENDING)])
    await db["attempts"].create_index([("task_id", ASCENDING), ("number", ASCENDING)], unique=True)
    await db["counters"].update_one(
        {"_id": "task_seq"}, {"$setOnInsert": {"value": 0}}, upsert=True
    )
    await meta.update_one({"_id": "schema"}, {"$max": {"version": SCHEMA_VERSION}}, upsert=True)

"""The stores the dashboard tests seed and serve: a SQLite file ``m.db`` and an
artifact directory ``art`` under one folder, as ``megaflow dashboard --db
--artifacts`` opens them."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from megaflow.storage.config import LocalArtifactsConfig, SqliteMetadataConfig


@contextlib.asynccontextmanager
async def open_stores(tmp: Path) -> AsyncIterator[tuple[Any, Any]]:
    """``tmp``'s metadata and artifact stores, started, and stopped after."""
    meta = SqliteMetadataConfig(path=str(tmp / "m.db")).build()
    art = LocalArtifactsConfig(root=str(tmp / "art")).build()
    await meta.start()
    await art.start()
    try:
        yield meta, art
    finally:
        await art.stop()
        await meta.stop()

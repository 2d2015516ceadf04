from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from megaflow.core.tasks import RunSpec, TaskSpec
from megaflow.storage.sqlite import SqliteMetadataStore


def make_tasks(run_id: str, n: int, prefix: str = "t") -> list[TaskSpec]:
    return [TaskSpec(id=f"{run_id}/{prefix}{i}", run_id=run_id, priority=i % 3) for i in range(n)]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteMetadataStore]:
    async with SqliteMetadataStore(tmp_path / "meta.db") as s:
        await s.create_run(RunSpec(id="r1", name="one"))
        yield s

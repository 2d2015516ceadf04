"""Fixtures for agent tests: a real local sandbox runtime and bundled SWE tasks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from megaflow.datasets.instance import SWEInstance
from megaflow.datasets.loader import load_instances
from megaflow.environment.abstract import Runtime
from megaflow.environment.config import DummyRuntimeConfig, LocalRuntimeConfig
from megaflow.environment.factory import make_runtime
from tests.agent.swe_tasks import TASKS


@pytest.fixture
async def local_runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    rt = make_runtime(LocalRuntimeConfig(root=str(tmp_path / "sandboxes")))
    await rt.start()
    try:
        yield rt
    finally:
        await rt.stop()


@pytest.fixture
async def dummy_runtime() -> AsyncIterator[Runtime]:
    rt = make_runtime(DummyRuntimeConfig())
    await rt.start()
    try:
        yield rt
    finally:
        await rt.stop()


@pytest.fixture(scope="session")
def instances() -> list[SWEInstance]:
    return load_instances(TASKS)

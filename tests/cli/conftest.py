"""Fixtures of the command-line tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.scheduler_service import ClusterScheduler


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterScheduler]:
    with ClusterScheduler(tmp_path) as c:
        yield c

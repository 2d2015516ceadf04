"""Fixtures of the dashboard tests: Chromium through Playwright, and where screenshots go."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.servers import need_binary

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / ".megaflow" / "test-artifacts" / "dashboard"


@pytest.fixture
def browser() -> Iterator[Any]:
    chromium = need_binary("chromium", "Debian's chromium; run scripts/install-sysdeps.sh")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def shots(tmp_path: Path) -> Iterator[Path]:
    """A folder for a test's screenshots; copied to .megaflow/test-artifacts/dashboard after."""
    out = tmp_path / "screenshots"
    out.mkdir()
    yield out
    SHOTS.mkdir(parents=True, exist_ok=True)
    for png in out.glob("*.png"):
        shutil.copy2(png, SHOTS / png.name)

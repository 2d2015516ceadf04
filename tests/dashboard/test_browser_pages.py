"""The sandboxes and training pages in Chromium, beside ``megaflow dashboard`` in its own process.

Sandboxes: real ``local`` sandboxes held by :mod:`tests.dashboard.sandbox_host`
(one busy, one idle), read from its ``/metrics`` through ``--metrics``; the
page shows both with their cgroup memory and the busy one's CPU share. The
same page without ``--metrics`` says it has no source. Training: the curves
of :func:`tests.dashboard.test_live_api.seed_training` (a checkpoint and a
final ``curve.json``). Screenshots: ``sandboxes.png``, ``sandboxes-no-source.png``,
``training.png``, ``training-run.png``.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.dashboard.test_browser import start_dashboard
from tests.fixtures.servers import free_port


def sign_in(browser: Any, link: str) -> Any:
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(link)
    page.wait_for_selector("#runs-table, #runs p")
    return page


@pytest.fixture
def stores(tmp_path: Path) -> list[str]:
    """An empty SQLite store and artifact directory (with the seeded training runs);
    made before the browser starts (Playwright's sync API holds this thread's loop)."""
    from megaflow.storage.config import LocalArtifactsConfig, SqliteMetadataConfig
    from tests.dashboard.test_live_api import seed_training

    async def go() -> None:
        meta = SqliteMetadataConfig(path=str(tmp_path / "m.db")).build()
        art = LocalArtifactsConfig(root=str(tmp_path / "art")).build()
        async with meta, art:
            await seed_training(art, tmp_path / "train")

    asyncio.run(go())
    return ["--db", str(tmp_path / "m.db"), "--artifacts", str(tmp_path / "art")]


def test_sandboxes_page(tmp_path: Path, stores: list[str], browser: Any, shots: Path) -> None:
    port = free_port()
    host = subprocess.Popen(
        [sys.executable, "-m", "tests.dashboard.sandbox_host", str(tmp_path / "sb"), str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    metrics = ["--metrics", f"http://127.0.0.1:{port}/metrics"]
    dash, base, link = start_dashboard([*stores, *metrics], tmp_path)
    bare, bare_base, bare_link = start_dashboard(stores, tmp_path / "train")
    try:
        assert host.stdout is not None
        assert host.stdout.readline().strip() == "ready", host.stdout.read()
        page = sign_in(browser, link)
        page.goto(f"{base}/sandboxes")
        # both sandboxes with memory; the busy one's CPU share measured over two readings
        page.wait_for_function(
            "() => { const rows = [...document.querySelectorAll('#sandboxes-table tr')].slice(1);"
            " return rows.length === 2 && rows.every(r => r.cells[5].innerText.endsWith('iB'))"
            " && rows.some(r => parseFloat(r.cells[4].innerText) > 20); }",
            timeout=30_000,
        )
        assert "busy" in page.locator("#states-table").inner_text()
        page.screenshot(path=str(shots / "sandboxes.png"), full_page=True)
        empty = sign_in(browser, bare_link)
        empty.goto(f"{bare_base}/sandboxes")
        empty.wait_for_selector("#reason")
        assert "--metrics-port" in empty.locator("#reason").inner_text()
        assert empty.locator("#wired").is_hidden()  # the notice, not empty metrics tables
        empty.screenshot(path=str(shots / "sandboxes-no-source.png"), full_page=True)
    finally:
        for proc in (dash, bare, host):
            proc.terminate()
            proc.wait(timeout=15)


def test_training_page(tmp_path: Path, stores: list[str], browser: Any, shots: Path) -> None:
    dash, base, link = start_dashboard([*stores, "--train-dir", str(tmp_path / "train")], tmp_path)
    try:
        page = sign_in(browser, link)
        page.goto(f"{base}/training")
        page.wait_for_selector("#training-table")
        text = page.locator("#training-table").inner_text()
        assert "tr-a" in text
        assert "0.60" in text  # the last held-out reward
        assert "curve.json" in text  # tr-b's unreadable file is named, not skipped
        page.screenshot(path=str(shots / "training.png"), full_page=True)
        page.get_by_role("link", name="tr-a").click()
        page.wait_for_selector("#steps-table")
        assert page.locator("#steps-table tr").count() == 4
        for chart in ("reward", "loss", "kl", "stale"):
            page.wait_for_selector(f"#{chart}-chart canvas")
        assert "checkpoint train/checkpoints/tr-a" in page.locator("#source").inner_text()
        page.screenshot(path=str(shots / "training-run.png"), full_page=True)
    finally:
        dash.terminate()
        dash.wait(timeout=10)

"""The dashboard in a real browser (Chromium through Playwright) beside a live ``megaflow run``.

``megaflow run`` and ``megaflow dashboard`` run as separate processes over the
same SQLite file and artifact directory, as an operator would start them.
The test signs in with the one-time link the dashboard prints, watches the
runs page's progress advance while the run goes, opens a run, a task and its
trajectory, and checks that nothing answers without the token. Screenshots
of each page go to ``.megaflow/test-artifacts/dashboard/``.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.dashboard.stores import open_stores
from tests.fixtures.servers import need_binary

REPO = Path(__file__).resolve().parents[2]
MEGAFLOW = str(Path(sys.executable).parent / "megaflow")
LINK = re.compile(r"(http://127\.0\.0\.1:\d+)/login\?code=(\S+)")


def run_config(tmp: Path) -> Path:
    cfg = {
        "name": "dash",
        "samples": 2,
        "tasks": {"type": "swebench", "path": str(REPO / "tasks/mini-swe"), "limit": 5},
        "agent": {"type": "builtin", "max_steps": 10},
        "model": {"type": "replay", "play": "gold"},
        "environment": {"runtime": {"type": "local", "root": str(tmp / "sb")}},
        "scheduler": {"max_concurrency": 2},
        "storage": {
            "metadata": {"type": "sqlite", "path": str(tmp / "m.db")},
            "artifacts": {"type": "local", "root": str(tmp / "art")},
        },
    }
    path = tmp / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def start_dashboard(stores: list[str], tmp: Path) -> tuple[subprocess.Popen[str], str, str]:
    proc = subprocess.Popen(
        [MEGAFLOW, "dashboard", *stores, "--port", "0", "--interval", "0.3",
         "--token-file", str(tmp / "token")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp,
    )  # fmt: skip
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if match := LINK.search(line):
            return proc, match.group(1), match.group(0)
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError(f"the dashboard printed no login link: {proc.stdout.read()}")


@contextlib.contextmanager
def signed_in(
    browser: Any, site: Path, train: str = "train", width: int = 1400
) -> Iterator[tuple[Any, str]]:
    """A page signed in to a dashboard over ``site``'s stores (``m.db``, ``art``
    and the training curves under ``train``), and the dashboard's address; the
    dashboard is stopped after."""
    stores = ["--db", str(site / "m.db"), "--artifacts", str(site / "art"),
              "--train-dir", str(site / train)]  # fmt: skip
    dash, base, link = start_dashboard(stores, site)
    try:
        page = browser.new_page(viewport={"width": width, "height": 900})
        page.goto(link)
        yield page, base
    finally:
        dash.terminate()
        dash.wait(timeout=10)


def seed_stores(tmp: Path, seeder: Callable[[Any, Any, Path], Awaitable[Any]]) -> None:
    """Fill ``tmp``'s stores (SQLite ``m.db``, artifacts under ``art``) with ``seeder``."""

    async def seed() -> None:
        async with open_stores(tmp) as (meta, art):
            await seeder(meta, art, tmp)

    asyncio.run(seed())


@contextlib.contextmanager
def browsing(stores: list[str], tmp: Path) -> Iterator[tuple[Any, Any, str]]:
    """A dashboard over ``stores`` and a Chromium of its own signed in to it, on
    the runs page: (browser, page, the dashboard's address). Both stop after."""
    dash, base, link = start_dashboard(stores, tmp)
    try:
        chromium = need_binary("chromium", "Debian's chromium; run scripts/install-sysdeps.sh")
        from playwright.sync_api import sync_playwright

        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=chromium, headless=True, args=["--no-sandbox"]
            )
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(link)
            page.wait_for_selector("#runs-table")
            yield browser, page, base
            browser.close()
    finally:
        dash.terminate()
        dash.wait(timeout=10)


def progress(page: Any) -> int:
    """Finished tasks of the run on the runs page (its progress cell reads ' done/total')."""
    cell = page.locator("#runs-table tr:nth-child(2) td:nth-child(2)").inner_text()
    return int(cell.strip().split("/")[0])


@pytest.mark.slow
def test_dashboard_pages_live_run_and_token(tmp_path: Path, browser: Any, shots: Path) -> None:
    config = run_config(tmp_path)
    run = subprocess.Popen(
        [MEGAFLOW, "run", str(config)], cwd=tmp_path, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not (tmp_path / "m.db").exists() and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)  # the dashboard refuses a database that does not exist yet
    dash, base, link = start_dashboard(["--config", str(config)], tmp_path)
    try:
        # nothing answers without the token
        anon = httpx.get(f"{base}/api/runs")
        assert anon.status_code == 401
        assert httpx.get(f"{base}/", follow_redirects=False).headers["location"] == "/login"
        assert httpx.get(f"{base}/static/dashboard.js").status_code == 401
        assert httpx.get(f"{base}/api/stream").status_code == 401
        token = (tmp_path / "token").read_text().strip()
        bearer = {"authorization": f"Bearer {token}"}
        assert httpx.get(f"{base}/api/runs", headers=bearer).status_code == 200
        assert (
            httpx.get(
                f"{base}/api/runs", headers={"authorization": "Bearer " + "x" * 40}
            ).status_code
            == 401
        )

        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{base}/")
        assert page.url.endswith("/login")
        page.screenshot(path=str(shots / "login.png"))

        page.goto(link)  # the one-time link sets the session cookie
        page.wait_for_selector("#runs-table", timeout=30_000)
        first = progress(page)
        page.wait_for_function(
            f"() => parseInt(document.querySelector('#runs-table tr:nth-child(2) td:nth-child(2)')"
            f".innerText.trim().split('/')[0]) > {first}",
            timeout=120_000,
        )
        assert run.poll() is None or progress(page) > first  # it moved while the run went
        page.screenshot(path=str(shots / "runs.png"), full_page=True)

        # the link works once
        other = browser.new_page()
        other.goto(link)
        assert other.url.endswith("/login") or "already used" in other.content()
        other.close()

        assert run.wait(timeout=300) == 0, run.stdout.read() if run.stdout else ""
        page.wait_for_function(
            "() => document.querySelector('#runs-table tr:nth-child(2) td:nth-child(2)')"
            ".innerText.includes('10/10')",
            timeout=30_000,
        )

        page.locator("#runs-table a").first.click()
        page.wait_for_selector("#tasks-table")
        page.wait_for_selector("#reward-chart canvas")
        assert page.locator("#tasks-table tr").count() == 11
        page.screenshot(path=str(shots / "run.png"), full_page=True)
        page.select_option("#f-state", "failed")
        page.wait_for_function("() => document.querySelectorAll('#tasks-table tr').length === 1")
        page.select_option("#f-state", "succeeded")
        page.wait_for_function("() => document.querySelectorAll('#tasks-table tr').length === 11")

        page.locator("#tasks-table a").first.click()
        page.wait_for_selector("#grade-table")
        assert "PASSED" in page.locator("#grade-table").inner_text()
        assert page.locator("#patch .add").count() > 0
        page.screenshot(path=str(shots / "task.png"), full_page=True)

        page.locator("#meta").get_by_role("link", name="trajectory").click()
        page.wait_for_selector("#steps .turn")
        kinds = page.locator("#steps .turn .kind").all_inner_texts()
        assert any("model call" in k for k in kinds)
        tools = page.locator("#steps .turn .act .tool-name").all_inner_texts()
        assert "write_file" in tools  # each tool call on its line, the gold patch's
        assert "submit" in tools
        outputs = page.locator("#steps .turn .obs .obs-label").all_inner_texts()
        assert outputs
        assert all(o.startswith("exit ") for o in outputs)  # each call's output, exit code
        page.screenshot(path=str(shots / "trajectory.png"), full_page=True)
    finally:
        dash.terminate()
        dash.wait(timeout=10)
        if run.poll() is None:
            run.terminate()
            run.wait(timeout=30)


@pytest.fixture
def seeded(tmp_path: Path) -> Path:
    """The seeded run of tests/dashboard/test_api.py in files under ``tmp_path``; made before
    the browser starts (Playwright's sync API holds an event loop in this thread)."""
    from tests.dashboard.test_api import seed_files

    async def go() -> None:
        meta, art = await seed_files(tmp_path)
        await art.stop()
        await meta.stop()

    asyncio.run(go())
    return tmp_path


def test_train_sample_tokens_in_the_browser(seeded: Path, browser: Any, shots: Path) -> None:
    """A seeded train sample: its tokens coloured by logprob, the fed-back ones marked."""
    from tests.dashboard.test_api import RUN

    tmp_path = seeded
    stores = ["--db", str(tmp_path / "m.db"), "--artifacts", str(tmp_path / "art")]
    dash, base, link = start_dashboard(stores, tmp_path)
    try:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(link)
        page.wait_for_selector("#runs-table")
        page.goto(f"{base}/trajectory?id={RUN}/t/0")
        page.wait_for_selector("#tokens span")
        masks = page.locator("#tokens span").evaluate_all("els => els.map(e => e.dataset.mask)")
        assert masks == ["1", "1", "0", "0", "1"]
        assert page.locator("#tokens span.fed").count() == 2
        page.screenshot(path=str(shots / "trajectory-train.png"), full_page=True)
        page.goto(f"{base}/trajectory?id={RUN}/t/1")
        page.wait_for_selector("#sample .error")
        assert "re-tokenized" in page.locator("#sample .error").inner_text()
        page.goto(f"{base}/run?id={RUN}")
        page.wait_for_selector("#tasks-table")
        page.select_option("#f-error", "infra_lost")
        page.wait_for_function("() => document.querySelectorAll('#tasks-table tr').length === 2")
        page.screenshot(path=str(shots / "run-filtered.png"), full_page=True)
    finally:
        dash.terminate()
        dash.wait(timeout=10)

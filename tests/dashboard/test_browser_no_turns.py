"""A trajectory that ended before the model answered, in Chromium, from a live run.

One ``megaflow run`` (the builtin agent on two mini-swe tasks, real sandboxes)
asks a real OpenAI-compatible HTTP server on loopback
(:mod:`tests.reliability.openai_server`): for the bank transfer task it never
answers, so the task's 15 s deadline ends the attempt before the model's first
answer and its trajectory holds no step; for the other it answers bytes that
are not JSON, so the one model call recorded has an error for an answer. The
trajectory page says so in both cases instead of showing an empty list of turns.
Screenshots at 1400 and 800 px: ``trajectory-no-turns-{1400,800}.png`` and
``trajectory-no-answer-{1400,800}.png`` in ``.megaflow/test-artifacts/dashboard/``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.dashboard.test_browser import MEGAFLOW, run_config, start_dashboard
from tests.dashboard.test_browser_rl import shoot
from tests.reliability.openai_server import flaky_openai

pytestmark = pytest.mark.slow


def _behave(n: int, body: dict[str, Any]) -> str:
    task = " ".join(str(m.get("content")) for m in body.get("messages", []))
    return "hang" if "transfer" in task.lower() else "garbage"


def _trajectory(page: Any, base: str, name: str) -> None:
    """The live run's task ``name``'s trajectory, opened from the run page."""
    page.goto(f"{base}/")
    page.locator("#runs-table a", has_text="noturns").first.click()
    page.wait_for_selector("#tasks-table a")
    page.locator("#tasks-table a", has_text=name).click()
    page.wait_for_selector("#attempts-table")
    page.locator("#meta").get_by_role("link", name="trajectory").click()
    page.wait_for_selector("#banner #outcome")


def test_a_trajectory_without_a_turn_says_why(tmp_path: Path, browser: Any) -> None:
    config = run_config(tmp_path)
    with flaky_openai(_behave) as server:
        cfg = yaml.safe_load(config.read_text())
        cfg.update(name="noturns", samples=1, deadline_s=15, max_attempts=1)
        cfg["tasks"]["limit"] = 2
        cfg["model"] = {"type": "openai", "base_url": server.base_url, "model": "flaky"}
        config.write_text(yaml.safe_dump(cfg))
        env = {**os.environ, "OPENAI_API_KEY": "unused"}
        done = subprocess.run(
            [MEGAFLOW, "run", str(config)], cwd=tmp_path, env=env, capture_output=True,
            text=True, timeout=300,
        )  # fmt: skip
    assert "2/2" in done.stdout, done.stdout + done.stderr
    dash, base, link = start_dashboard(["--config", str(config)], tmp_path)
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(link)
        page.wait_for_selector("#runs-table")
        _trajectory(page, base, "bankxfer")
        page.wait_for_selector("#no-turns")
        assert page.locator("#outcome").inner_text() == "timed out"
        assert page.locator("#steps .turn").count() == 0
        said = page.locator("#no-turns").inner_text()
        error = page.locator("#banner-error").inner_text()
        assert "deadline" in error
        assert said == (
            f"No turn was recorded: the attempt ended with timed out ({error}) "
            "before the model answered."
        )
        assert page.locator("#no-turns").is_visible()
        shoot(page, "trajectory-no-turns")
        # a model call that got bytes for an answer: its turn says so, no notice
        _trajectory(page, base, "bizdays")
        page.wait_for_selector("#steps .turn")
        assert page.locator("#outcome").inner_text() == "agent error"
        assert page.locator("#no-turns").count() == 0
        failed = page.locator("#steps .turn .call-failed").inner_text()
        assert failed.startswith("no answer: ")
        assert "no usable chat completion" in failed
        shoot(page, "trajectory-no-answer")
    finally:
        dash.terminate()
        dash.wait(timeout=10)

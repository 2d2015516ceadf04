"""The trajectory inspector in Chromium: errored tasks of a live run, and a seeded train sample.

One ``megaflow run`` (the builtin agent on two mini-swe tasks, real sandboxes)
asks a real OpenAI-compatible HTTP server on loopback
(:mod:`tests.reliability.openai_server`): for the bank transfer task it
answers prose without a tool call (the agent gives up: an agent error), for
the other a ``bash`` call running ``sleep 60`` past the run's 20 s deadline
(the task ends without a result trajectory). The same SQLite file holds
:mod:`tests.dashboard.seed_inspector` (a train group with a byte-level
tokenizer, an ``edit`` call, a timed-out sibling). One ``megaflow dashboard``
serves both. Screenshots at 1400 and 800 px go to
``.megaflow/test-artifacts/dashboard/`` (named in ``docs/dashboard.md``).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

import pytest
import yaml

from tests.dashboard.seed_inspector import FEEDBACK, GROUP, PROMPT, SAID, TIMED_OUT, seed_inspector
from tests.dashboard.test_browser import MEGAFLOW, browsing, run_config, seed_stores
from tests.dashboard.test_browser_rl import shoot
from tests.reliability.openai_server import flaky_openai

pytestmark = pytest.mark.slow


def _behave(n: int, body: dict[str, Any]) -> str:
    task = " ".join(str(m.get("content")) for m in body.get("messages", []))
    return "prose" if "transfer" in task.lower() else "sleep"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("inspector")
    config = run_config(tmp)  # its stores are tmp/m.db and tmp/art
    seed_stores(tmp, seed_inspector)
    with flaky_openai(_behave) as server:
        cfg = yaml.safe_load(config.read_text())
        cfg.update(name="errored", samples=1, deadline_s=20, max_attempts=1)
        cfg["tasks"]["limit"] = 2
        cfg["agent"]["max_format_errors"] = 2
        cfg["model"] = {"type": "openai", "base_url": server.base_url, "model": "flaky"}
        config.write_text(yaml.safe_dump(cfg))
        env = {**os.environ, "OPENAI_API_KEY": "unused"}
        done = subprocess.run(
            [MEGAFLOW, "run", str(config)], cwd=tmp, env=env, capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip
    assert "2/2" in done.stdout, done.stdout + done.stderr  # both ended (the checks fail)
    with browsing(["--config", str(config)], tmp) as (_, page, base):
        yield {"base": base, "page": page}


def _open_task(page: Any, base: str, name: str) -> dict[str, str]:
    """The live run's task ``name`` opened from the run page; its outcome and error."""
    page.goto(f"{base}/")
    page.locator("#runs-table a", has_text="errored").first.click()
    page.wait_for_selector("#tasks-table a")
    page.locator("#tasks-table a", has_text=name).click()
    page.wait_for_selector("#attempts-table")
    said = {"outcome": page.locator("#outcome").inner_text(),
            "error": page.locator("#task-error").inner_text()}  # fmt: skip
    assert said["error"] in page.locator("#attempts-table").inner_text()
    return said


def test_a_task_that_ended_without_a_result_opens_its_trajectory(site: dict[str, Any]) -> None:
    page = site["page"]
    task = _open_task(page, site["base"], "bizdays")
    assert task["outcome"] not in ("resolved", "unresolved")
    meta = page.locator("#meta").inner_text()
    assert "ungraded: no reward" in meta  # the scheduler's result holds reward 0.0: not a grade
    assert "reward 0.00" not in meta
    shoot(page, "task-errored-live")
    page.locator("#meta").get_by_role("link", name="trajectory").click()
    page.wait_for_selector("#steps .turn")
    assert page.locator("#outcome").inner_text() == task["outcome"]  # the task's, not 'retried'
    assert page.locator("#banner-error").inner_text() == task["error"]
    assert page.locator("#banner.bad").count() == 1
    act = page.locator("#steps .act").first.inner_text()
    assert act == "bash sleep 60"  # the call on one line, not a box per argument
    assert page.locator("#steps .obs-none").inner_text().startswith("no output")  # cut off
    assert page.locator("#prompt .msg.system").is_visible()  # the prompt shown, not a count
    assert "business_days" in page.locator("#prompt .msg.user").inner_text().lower()
    shoot(page, "trajectory-errored-live")


def test_an_agent_error_shows_what_the_agent_told_the_model(site: dict[str, Any]) -> None:
    page = site["page"]
    task = _open_task(page, site["base"], "bankxfer")
    assert task["outcome"] == "agent error"
    page.locator("#meta").get_by_role("link", name="trajectory").click()
    page.wait_for_selector("#steps .turn")
    assert "malformed answers" in page.locator("#banner-error").inner_text()
    turns = page.locator("#steps .turn")
    assert turns.count() == 2  # two malformed answers: the agent's max_format_errors
    assert "no tool call" in turns.nth(1).locator(".msg.user").inner_text()  # the feedback
    assert page.locator("#prompt .msg.system").is_visible()  # the prompt shown, not a count
    assert "transfer" in page.locator("#prompt .msg.user").inner_text().lower()
    shoot(page, "trajectory-agent-error-live")


def test_train_sample_inspector(site: dict[str, Any]) -> None:
    page = site["page"]
    page.goto(f"{site['base']}/trajectory?id={GROUP}/0")
    page.wait_for_selector("#tokens span")
    spans = page.locator("#tokens span")
    text = "".join(spans.evaluate_all("es => es.map(e => e.textContent)"))
    assert text.startswith(SAID)  # é and ✓ whole, not U+FFFD per byte
    assert "\ufffd" not in text
    joined = page.locator("#tokens span.joined").first.get_attribute("title")
    assert joined.endswith("(part of the next token's character)")
    assert page.locator("#prompt-tokens").is_visible()  # the prompt shown, unfolded
    assert "".join(page.locator("#prompt-tokens span").all_text_contents()) == PROMPT
    assert page.locator("#prompt .msg.system").inner_text().endswith("You fix settings.")
    turns = page.locator("#steps .turn")
    assert turns.count() == 2
    second = turns.nth(1)
    assert FEEDBACK in second.locator(".msg.user").inner_text()  # no tool ran before it
    assert second.locator(".act").inner_text() == "edit settings.py"
    assert second.locator(".diff .del").all_inner_texts() == ["-DEBUG = True,\n"]
    assert second.locator(".diff .add").all_inner_texts() == ["+DEBUG = True\n"]
    assert " NAME = 'x'" in second.locator(".diff").inner_text()  # context kept
    boxed = second.evaluate(
        "t => [...t.querySelectorAll('*')]"
        ".filter(e => getComputedStyle(e).borderTopWidth !== '0px').length"
    )
    assert boxed == 0  # one box per turn: nothing inside it is boxed again
    shoot(page, "trajectory-train-inspector")
    page.locator("#group-next").click()  # to the timed-out sibling
    page.wait_for_selector("#banner-error")
    assert unquote(page.url).endswith(f"{GROUP}/1")
    assert page.locator("#outcome").inner_text() == "timed out"
    assert page.locator("#banner-error").inner_text() == TIMED_OUT
    assert page.locator("#masked").is_visible()  # ungraded: its tokens trained nothing
    shoot(page, "trajectory-timed-out")
    page.locator("#group-prev").click()
    page.wait_for_selector("#tokens span")
    assert unquote(page.url).endswith(f"{GROUP}/0")

"""A real ``megaflow train`` loop feeding the training page: a figure per step, not per checkpoint.

The loop (two steps of the random-weights policy of ``tests/train_loop``,
real sandboxes) rewrites ``curve.json`` after every step, before it prints
the step's line, with the trainer's figures (grad norm, clip fraction,
groups with signal, lengths, the weight sync's time, the rewards' spread).
The dashboard, in its own process, then charts them in Chromium; KL is
hidden (``kl_coef`` 0); a train sample's tokens are decoded by the policy's
tokenizer. Screenshots: ``training-live.png``, ``trajectory-train-live.png``.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from megaflow.app.training.loop import TrainLoop
from megaflow.config import parse_config
from tests.dashboard.test_browser import signed_in
from tests.train_loop.conftest import policy, train_config

__all__ = ["policy"]  # the session fixture, shared with tests/train_loop
pytestmark = pytest.mark.slow
RUN = "tl-dash"


@pytest.fixture
def trained(tmp_path: Path, policy: Path) -> tuple[Path, list[int]]:
    """Two steps trained; how many steps curve.json held when each step's line was printed."""
    raw = train_config(tmp_path, policy, steps=2, checkpoint_every=0)
    seen: list[int] = []

    def printer(line: str) -> None:
        if line.startswith("step "):
            curve = json.loads((tmp_path / "out" / RUN / "curve.json").read_text())
            seen.append(len(curve["steps"]))

    asyncio.run(TrainLoop(parse_config(raw), run_id=RUN, printer=printer).run())
    return tmp_path, seen


def test_every_step_reaches_the_training_page(
    trained: tuple[Path, list[int]], browser: Any, shots: Path
) -> None:
    tmp, seen = trained
    assert seen == [1, 2]  # curve.json grew with each step, not at the end only
    steps = json.loads((tmp / "out" / RUN / "curve.json").read_text())["steps"]
    for key in ("grad_norm", "clip_fraction", "groups", "groups_with_signal", "response_length",
                "reward_std", "sync_s", "train_s", "rollout_s"):  # fmt: skip
        assert all(s[key] is not None for s in steps), key
    assert all(s["tokens"] > 0 for s in steps)  # every step updated: tokens/s is charted
    assert [s["groups"] for s in steps] == [2, 2]  # prompts_per_step
    with signed_in(browser, tmp, "out") as (page, base):
        page.goto(f"{base}/training?id={RUN}")
        page.wait_for_selector("#grad-chart canvas")
        shown = page.locator("#charts").get_attribute("data-shown").split()
        for chart in ("loss", "grad", "clip", "signal", "length", "tps", "time"):
            assert chart in shown, chart
        assert "kl" not in shown  # kl_coef 0: not measured, not drawn
        assert page.locator("#steps-table tr").count() == 3
        page.screenshot(path=str(shots / "training-live.png"), full_page=True)
        page.locator("#run-link").click()  # the run's rollouts, then one train sample's tokens
        page.wait_for_selector("#tasks-table")
        page.select_option("#f-type", "train")
        page.wait_for_function("() => location.search.includes('type=train')")
        page.locator("#tasks-table a").first.click()
        page.locator("#meta").get_by_role("link", name="trajectory").click()
        # the first trajectory page waits for the run's advantage estimator, and so
        # for torch's first import in the dashboard (tens of seconds on 2 busy cores)
        page.wait_for_selector("#tokens span", timeout=120_000)
        assert "Decoded with" in page.locator("#sample").inner_text()  # the policy's tokenizer
        texts = page.locator("#tokens span").all_text_contents()
        assert not any(re.fullmatch(r"\[\d+\]", t) for t in texts)  # text, not [id]
        assert page.locator("#group-table tr").count() == 3  # the sample and its sibling
        page.screenshot(path=str(shots / "trajectory-train-live.png"), full_page=True)

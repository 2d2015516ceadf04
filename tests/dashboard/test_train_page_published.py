"""A run whose curve goes elsewhere (``--curve``, as ``make run`` names it) still reaches the
training page step by step and round by round, and a step that took no update charts
none of the figures only an update measures.

The loop (two steps of the random-weights policy of ``tests/train_loop``, real
sandboxes, ``step_without_signal`` off: every group is flat, so no step updates)
is checked from its own printer: when a step's or a held-out round's line is
printed, ``OUT_DIR/<run id>/curve.json`` (where the dashboard reads) already
holds it. The dashboard, in its own process, then shows the run in Chromium:
the time chart splits each step into its rollouts and the trainer, and loss,
grad norm, clip fraction, entropy and mismatch are hidden. Screenshot:
``training-no-update.png``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from megaflow.app.training.loop import TrainLoop
from megaflow.config import parse_config
from tests.dashboard.test_browser import signed_in
from tests.train_loop.conftest import policy, train_config

__all__ = ["policy"]  # the session fixture, shared with tests/train_loop
pytestmark = pytest.mark.slow
RUN = "tl-elsewhere"


@pytest.fixture
def trained(tmp_path: Path, policy: Path) -> tuple[Path, list[tuple[str, int, int]]]:
    """Two steps trained with the curve's PNG elsewhere; for each step's and round's line,
    how many steps and rounds the dashboard's file held when it was printed."""
    raw = train_config(tmp_path, policy, steps=2, checkpoint_every=0, step_without_signal=False)
    raw["train"]["curve"] = str(tmp_path / "quickstart" / "trained.png")
    live = tmp_path / "out" / RUN / "curve.json"
    seen: list[tuple[str, int, int]] = []

    def printer(line: str) -> None:
        if line.startswith(("step ", "held-out reward")):
            curve = json.loads(live.read_text()) if live.is_file() else {"steps": [], "evals": []}
            seen.append((line.split(" ")[0], len(curve["steps"]), len(curve["evals"])))

    asyncio.run(TrainLoop(parse_config(raw), run_id=RUN, printer=printer).run())
    return tmp_path, seen


def test_a_curve_named_elsewhere_reaches_the_page_as_it_grows(
    trained: tuple[Path, list[tuple[str, int, int]]], browser: Any, shots: Path
) -> None:
    tmp, seen = trained
    # before training, step 1, step 2, after step 2: each already in the dashboard's file
    assert seen == [("held-out", 0, 1), ("step", 1, 1), ("step", 2, 1), ("held-out", 2, 2)]
    assert (tmp / "quickstart" / "trained.json").is_file()  # and the final one where asked
    steps = json.loads((tmp / "out" / RUN / "curve.json").read_text())["steps"]
    for s in steps:
        assert s["weights_version"] == 0  # no signal, no update
        assert (s["loss"], s["grad_norm"], s["clip_fraction"], s["entropy"]) == (None,) * 4
        assert s["train_s"] is not None
        assert s["rollout_s"] is not None
        assert s["rollout_s"] + s["train_s"] <= s["seconds"]
    with signed_in(browser, tmp, "out") as (page, base):
        page.goto(f"{base}/training?id={RUN}")
        page.wait_for_selector("#time-chart canvas")
        shown = page.locator("#charts").get_attribute("data-shown").split()
        for chart in ("signal", "length", "time"):
            assert chart in shown, chart
        for chart in ("loss", "grad", "clip", "entropy", "mismatch", "kl", "tps"):
            assert chart not in shown, chart
        legend = page.locator("#time-chart").inner_text()
        assert "waiting for rollouts" in legend
        assert "trainer" in legend
        assert "weight sync" not in legend  # nothing was pushed
        heads = page.locator("#steps-table th").all_inner_texts()
        assert "loss" not in heads
        assert "grad norm" not in heads
        page.screenshot(path=str(shots / "training-no-update.png"), full_page=True)

"""The reward chart of a trained run overlaid with its control, in Chromium: the train
reward's spread and the held-out interval are shaded bands of their line's colour, so
the legend has one entry per series (the two runs' spread and interval edges were 8 more
lines, 14 entries in all).

Two curves written with the loop's own :class:`~megaflow.app.training.curve.Curve`, each
with a per-step spread, held-out rounds with their 95% interval and pass@k:
``arm`` (trained) and ``arm-control`` (rewards shuffled in each group). Screenshot:
``training-bands.png``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from megaflow.app.training.curve import Curve, EvalPoint, StepPoint
from tests.dashboard.stores import open_stores
from tests.dashboard.test_browser import signed_in

pytestmark = pytest.mark.slow
RUNS = {"arm": ("none", (0.2, 0.5, 0.8)), "arm-control": ("shuffled", (0.2, 0.25, 0.2))}
# the legend's entries a reader sees
LEGEND = """() => [...document.querySelectorAll('#reward-chart .u-legend .u-series')]
    .filter((tr) => getComputedStyle(tr).display !== 'none').map((tr) => tr.innerText.trim())"""
PLOT = "() => { const p = document.getElementById('reward-chart').plot; "


def _curve(run: str, control: str, rewards: tuple[float, ...]) -> Curve:
    steps = [StepPoint(step=n + 1, prompts=["p"], reward_mean=r, reward_std=0.1, loss=0.1,
                       weights_version=n + 1) for n, r in enumerate(rewards)]  # fmt: skip
    evals = [EvalPoint(step=s, weights_version=s, reward_mean=m, ci_low=m - 0.15,
                       ci_high=m + 0.15, samples=32, pass_at_k=m + 0.1, k=4)
             for s, m in ((0, 0.3), (3, rewards[-1]))]  # fmt: skip
    return Curve(run_id=run, control=control, steps=steps, evals=evals)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    for run, (control, rewards) in RUNS.items():
        _curve(run, control, rewards).write_json(tmp_path / "train" / run / "curve.json")

    async def create() -> None:  # the dashboard opens an existing database only
        async with open_stores(tmp_path):
            pass

    asyncio.run(create())
    return tmp_path


def test_an_overlay_has_one_legend_entry_per_series(site: Path, browser: Any, shots: Path) -> None:
    with signed_in(browser, site) as (page, base):
        page.goto(f"{base}/training?id=arm&vs=arm-control")
        page.wait_for_function(
            "() => document.getElementById('reward-chart').innerText.includes('arm-control:')"
        )
        entries = [" ".join(e.split()) for e in page.evaluate(LEGEND)]
        assert entries == [
            "arm: train reward (± std)", "arm: held-out pass@1 (95% interval)",
            "arm: held-out pass@4",
            "arm-control: train reward (± std)", "arm-control: held-out pass@1 (95% interval)",
            "arm-control: held-out pass@4",
        ]  # fmt: skip
        # each run's spread and interval are shaded between their edges, in the line's colour
        bands = page.evaluate(
            PLOT + "return p.bands.map((b) => "
            "[b.series, typeof b.fill === 'function' ? b.fill(p, b.series[0]) : b.fill]); }"
        )
        stroke = page.evaluate(PLOT + "return p.series.map((s) => s.label); }")
        assert len(bands) == 4
        for (top, bottom), fill in bands:
            assert stroke[top].endswith("(band top)")
            assert stroke[bottom].endswith("(band bottom)")
            assert fill.endswith("26")  # translucent
        data = page.evaluate(PLOT + "return p.data; }")
        assert data[0] == [0, 1, 2, 3]  # the steps and the round before training
        assert data[1][1:] == pytest.approx([0.2, 0.5, 0.8])  # the train reward stays series 1
        top, bottom = bands[0][0]
        assert data[top][1:] == pytest.approx([0.3, 0.6, 0.9])  # reward + std
        assert data[bottom][1:] == pytest.approx([0.1, 0.4, 0.7])  # reward - std
        ci_top, ci_bottom = bands[1][0]
        assert (data[ci_top][0], data[ci_bottom][3]) == pytest.approx((0.45, 0.65))  # ± 0.15
        # hiding a series in the legend hides its band with it
        entry = page.locator("#reward-chart .u-legend .u-series", has_text="arm: train reward")
        entry.first.click()
        shown = page.evaluate(PLOT + "return p.series.map((s) => s.show); }")
        assert (shown[1], shown[top], shown[bottom]) == (False, False, False)
        entry.first.click()
        assert page.evaluate(PLOT + f"return p.series[{top}].show; }}") is True
        page.locator("#reward-chart").screenshot(path=str(shots / "training-bands.png"))
        page.screenshot(path=str(shots / "training-bands-page.png"), full_page=True)

"""The training page's charts sized to the page, its steps table and its smoothing, in Chromium.

Run ``lay`` is written with the loop's own :class:`~megaflow.app.training.curve.Curve`
(four steps with every figure the loop records, KL 0.0 as an older loop wrote it
with ``kl_coef`` 0, a truncated share of 0 throughout) and recorded in a real
SQLite metadata store with its config; a real ``megaflow dashboard`` process
serves it. At 1400 px two charts share a row, at 800 px one chart takes it, each
as wide as its share (within a few pixels), and the page follows a resize; the
steps table leaves out what was not computed (KL) and keeps each row on one
line; the smoothing slider changes the plotted values to their moving average;
a flat series of zeros is not drawn on an axis below 0. Screenshots:
``training-layout-1400.png``, ``training-layout-800.png``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from megaflow.app.training.curve import Curve, StepPoint
from megaflow.core.tasks import RunSpec
from megaflow.storage.config import LocalArtifactsConfig, SqliteMetadataConfig
from tests.dashboard.test_browser import signed_in

pytestmark = pytest.mark.slow
RUN = "lay"
REWARDS = [0.2, 0.6, 0.1, 0.9]
CHARTS = """() => [...document.querySelectorAll('#charts > div:not([hidden])')]
    .map((d) => d.querySelector('canvas').getBoundingClientRect().width)"""


def _step(n: int, reward: float) -> StepPoint:
    return StepPoint(
        step=n, prompts=["p"], reward_mean=reward, reward_std=0.3, loss=0.5 / n, kl=0.0,
        weights_version=n, samples=8, tokens=4000, seconds=4.0, rollout_s=2.5, train_s=1.0,
        sync_s=0.3, groups=4, groups_with_signal=3, grad_norm=1.0 / n, clip_fraction=0.01,
        mismatch=1e-4, entropy=1.2, response_length=40.0 + n, truncation_rate=0.0, lr=1e-5,
    )  # fmt: skip


@pytest.fixture
def site(tmp_path: Path) -> Path:
    steps = [_step(n + 1, r) for n, r in enumerate(REWARDS)]
    Curve(run_id=RUN, steps=steps).write_json(tmp_path / "train" / RUN / "curve.json")

    async def record() -> None:
        meta = SqliteMetadataConfig(path=str(tmp_path / "m.db")).build()
        art = LocalArtifactsConfig(root=str(tmp_path / "art")).build()
        async with meta, art:
            config = {"train": {"kl_coef": 0.0, "steps": 4}}
            await meta.create_run(RunSpec(id=RUN, name=RUN, config=config))

    asyncio.run(record())
    return tmp_path


def _ema(values: list[float], alpha: float) -> list[float]:
    out: list[float] = []
    for v in values:
        out.append(v if not out else alpha * out[-1] + (1 - alpha) * v)
    return out


def test_charts_fill_the_page_and_the_table_keeps_what_was_computed(
    site: Path, browser: Any, shots: Path
) -> None:
    with signed_in(browser, site) as (page, base):
        page.goto(f"{base}/training?id={RUN}")
        page.wait_for_selector("#time-chart canvas")
        for width, per_row in ((1400, 2), (800, 1)):
            page.set_viewport_size({"width": width, "height": 900})
            box = page.evaluate("() => document.getElementById('charts').clientWidth")
            share = (box - 24 * (per_row - 1)) / per_row
            # the resize re-renders (the poll would too, every 2 s)
            page.wait_for_function(f"() => ({CHARTS})().every((w) => w >= {share - 6})")
            widths = page.evaluate(CHARTS)
            assert all(share - 6 <= w <= share for w in widths), (width, box, widths)
            over = page.evaluate("() => document.documentElement.scrollWidth - innerWidth")
            assert over <= 1, f"{width} px: the page scrolls {over} px sideways"
            heights = page.evaluate(
                "() => [...document.querySelectorAll('#steps-table td')].map((c) => c.offsetHeight)"
            )
            assert max(heights) < 40, f"{width} px: a table cell wraps ({max(heights)} px)"
            page.screenshot(path=str(shots / f"training-layout-{width}.png"), full_page=True)
        heads = page.locator("#steps-table th").all_inner_texts()
        assert "KL" not in heads  # kl_coef 0: not measured, although an older loop wrote 0.0
        for head in (
            "loss",
            "grad norm",
            "signal",
            "tokens/s",
            "rollouts s",
            "trainer s",
            "sync s",
        ):
            assert head in heads, head
        cells = page.locator("#steps-table tr").nth(1).locator("td").all_inner_texts()
        first = dict(zip(heads, cells, strict=True))
        assert (first["signal"], first["tokens/s"], first["trainer s"]) == ("3/4", "1000", "1.0")
        shown = page.locator("#charts").get_attribute("data-shown").split()
        # every figure the curve holds has its chart (KL, not measured, has none); tokens/s of
        # the step and of the trainer apart: the trainer alone is far faster than the step
        assert shown == ["loss", "grad", "clip", "signal", "mismatch", "entropy", "length",
                         "trunc", "tps", "tps-train", "time", "stale", "samples"]  # fmt: skip
        tps = "() => document.getElementById('ID-chart').plot.data[1]"
        assert page.evaluate(tps.replace("ID", "tps")) == pytest.approx([1000.0] * 4)
        assert page.evaluate(tps.replace("ID", "tps-train")) == pytest.approx([4000.0] * 4)
        time_legend = page.locator("#time-chart").inner_text()
        for series in ("step", "waiting for rollouts", "trainer", "weight sync"):
            assert series in time_legend, series
        # a flat series of zeros: its axis starts at 0, not -1
        assert page.evaluate("() => document.getElementById('trunc-chart').plot.scales.y.min") == 0
        train = "() => document.getElementById('reward-chart').plot.data[1]"
        assert page.evaluate(train) == pytest.approx(REWARDS)
        page.locator("#smooth").fill("0.5")
        page.wait_for_function("() => location.search.includes('smooth=0.5')")
        assert page.evaluate(train) == pytest.approx(_ema(REWARDS, 0.5))

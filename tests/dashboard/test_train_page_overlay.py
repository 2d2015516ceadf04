"""A trained run beside its control on the training page, in Chromium.

Three curves written with the loop's own :class:`~megaflow.app.training.curve.Curve`:
``arm`` (trained), ``arm-a-other`` (another trained run) and ``arm-control`` (its
control: rewards shuffled in each group, as ``megaflow train --control shuffled``
records it; its id sorts after the other's). The list says which run is a control
arm; a run's own page offers the overlay with the control picked, and one click
draws both (``?vs=``). At 800 px the list keeps each figure on one line.
Screenshots: ``training-list-800.png``, ``training-vs-control.png``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from megaflow.app.training.curve import Curve, StepPoint
from tests.dashboard.stores import open_stores
from tests.dashboard.test_browser import signed_in

pytestmark = pytest.mark.slow
CURVES = {"arm": ("none", (0.2, 0.5, 0.8)), "arm-a-other": ("none", (0.1, 0.1, 0.2)),
          "arm-control": ("shuffled", (0.2, 0.2, 0.2))}  # fmt: skip
# the most lines any cell of the list but its paths takes (the text's height over one line's)
LINES = """() => Math.max(...[...document.querySelectorAll('#training-table tr')].slice(1)
    .flatMap((tr) => [...tr.cells].slice(0, -1).map((td) => {
        const r = document.createRange(), line = parseFloat(getComputedStyle(td).lineHeight);
        r.selectNodeContents(td);
        return Math.round(r.getBoundingClientRect().height / line);
    })))"""


@pytest.fixture
def site(tmp_path: Path) -> Path:
    import asyncio

    for run, (control, rewards) in CURVES.items():
        steps = [StepPoint(step=n + 1, prompts=["p"], reward_mean=r, loss=0.1, weights_version=n)
                 for n, r in enumerate(rewards)]  # fmt: skip
        curve = Curve(run_id=run, control=control, steps=steps)
        curve.write_json(tmp_path / "train" / run / "curve.json")

    async def create() -> None:  # the dashboard opens an existing database only
        async with open_stores(tmp_path):
            pass

    asyncio.run(create())
    return tmp_path


def test_a_run_is_overlaid_with_its_control_from_its_own_page(
    site: Path, browser: Any, shots: Path
) -> None:
    with signed_in(browser, site) as (page, base):
        page.goto(f"{base}/training")
        page.wait_for_selector("#training-table")
        rows = page.locator("#training-table tr").all_inner_texts()
        arms = {r.split("\t")[0]: r.split("\t")[1] for r in rows[1:]}
        assert arms == {"arm": "trained", "arm-control": "control: shuffled rewards",
                        "arm-a-other": "trained"}  # fmt: skip
        # the list's picker: the first run beside a control, not beside itself
        assert page.locator("#ov-a").input_value() == "arm"
        assert page.locator("#ov-b").input_value() == "arm-control"
        # at 800 px a figure is never broken over two lines (only the paths may wrap)
        page.set_viewport_size({"width": 800, "height": 900})
        assert page.evaluate(LINES) == 1
        assert page.evaluate("() => document.documentElement.scrollWidth - innerWidth") <= 1
        page.screenshot(path=str(shots / "training-list-800.png"), full_page=True)
        page.set_viewport_size({"width": 1400, "height": 900})
        page.goto(f"{base}/training?id=arm")
        page.wait_for_selector("#loss-chart canvas")
        # the picker fills from its own request, after or before the charts: wait for it
        page.wait_for_selector("#overlay", state="visible", timeout=10_000)
        page.wait_for_function("() => document.getElementById('ov-b').value === 'arm-control'")
        assert page.locator("#ov-a").input_value() == "arm"
        page.locator("#ov-go").click()
        page.wait_for_url(f"{base}/training?id=arm&vs=arm-control")
        page.wait_for_function(
            "() => document.getElementById('reward-chart').innerText.includes('arm-control:')"
        )
        legend = page.locator("#reward-chart").inner_text()
        assert "arm: train reward" in legend
        assert "arm-control: train reward" in legend
        assert page.locator("#ov-b").input_value() == "arm-control"  # the pair kept
        page.screenshot(path=str(shots / "training-vs-control.png"), full_page=True)

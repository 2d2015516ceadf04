"""The training page's held-out rounds: a table of each round's figures, each round linked to
its rollouts on the run page, in Chromium.

Over :mod:`tests.dashboard.seed_rl` (run ``rl``: 120 held-out tasks of the round
before training, ``.e00000.``, and its curve with rounds before training and after
step 3) in a real SQLite store, served by a real ``megaflow dashboard`` process.
Screenshot: ``training-rounds.png``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from megaflow.storage.config import LocalArtifactsConfig, SqliteMetadataConfig
from tests.dashboard.seed_rl import RUN, seed_curves, seed_rl
from tests.dashboard.test_browser import signed_in

pytestmark = pytest.mark.slow


@pytest.fixture
def site(tmp_path: Path) -> Path:
    async def seed() -> None:
        meta = SqliteMetadataConfig(path=str(tmp_path / "m.db")).build()
        art = LocalArtifactsConfig(root=str(tmp_path / "art")).build()
        async with meta, art:
            await seed_rl(meta, art, tmp_path)

    asyncio.run(seed())
    seed_curves(tmp_path / "train")
    return tmp_path


def test_each_held_out_round_has_its_figures_and_its_rollouts(
    site: Path, browser: Any, shots: Path
) -> None:
    with signed_in(browser, site) as (page, base):
        page.goto(f"{base}/training?id={RUN}")
        page.wait_for_selector("#rounds-table")
        heads = page.locator("#rounds-table th").all_inner_texts()
        assert heads == ["step", "version", "pass@1 [95% interval]", "pass@k", "samples"]
        rows = [r.split("\t") for r in page.locator("#rounds-table tr").all_inner_texts()[1:]]
        assert rows == [["0", "0", "0.250 [0.100, 0.400]", "-", "8"],
                        ["3", "3", "0.700 [0.600, 0.800]", "0.900 (k 4)", "8"]]  # fmt: skip
        page.screenshot(path=str(shots / "training-rounds.png"), full_page=True)
        page.locator("#rounds-table a", has_text="0").click()  # the round before training
        page.wait_for_selector("#tasks-table")
        assert page.locator("#f-type").input_value() == "eval"
        assert page.locator("#f-q").input_value() == ".e00000"
        page.wait_for_function(
            "() => [...document.querySelectorAll('#tasks-table tr')].length > 10"
        )
        ids = page.locator("#tasks-table tr td:first-child").all_inner_texts()
        assert all(".e00000." in i for i in ids), ids[:3]

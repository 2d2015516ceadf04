"""Held-out task sets on the training page: each set's latest round in the API and in
a table, and each set's pass@1 per round as a series of the reward chart.

The curves are written by the loop's own :class:`~megaflow.app.training.curve.Curve`
(as ``megaflow train`` writes ``curve.json``): ``sets`` holds two held-out sets
(``qa`` and ``swe``) evaluated before training and after step 2; ``plain``
holds out a split of instances, with no sets. The page is read in Chromium
from a real ``megaflow dashboard`` process over real SQLite and artifact stores.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from megaflow.app.training.curve import Curve, EvalPoint, StepPoint
from megaflow.dashboard.auth import DashboardAuth
from megaflow.dashboard.server import create_app
from megaflow.dashboard.training import TrainingRuns
from tests.dashboard.stores import open_stores
from tests.dashboard.test_browser import signed_in

TOKEN = "s" * 32
H = {"authorization": f"Bearer {TOKEN}"}


def _set(mean: float, low: float, high: float, samples: int, **extra: Any) -> dict[str, Any]:
    return {"samples": samples, "masked": 0, "reward_mean": mean, "ci_low": low,
            "ci_high": high, "pass_at_k": None, "malformed": 0.5, **extra}  # fmt: skip


def write_curves(train_dir: Path) -> None:
    steps = [StepPoint(step=n, prompts=["qa.q0"], reward_mean=0.1 * n, weights_version=n)
             for n in (1, 2)]  # fmt: skip
    before = EvalPoint(step=0, weights_version=0, reward_mean=0.2, ci_low=0.0, ci_high=0.5,
                       samples=6, sets={"qa": _set(0.25, 0.0, 0.6, 4),
                                        "swe": _set(0.0, 0.0, 0.8, 2)})  # fmt: skip
    after = EvalPoint(step=2, weights_version=2, reward_mean=0.5, ci_low=0.1, ci_high=0.9,
                      samples=6, sets={"qa": _set(0.75, 0.3, 1.0, 4, greedy=1.0),
                                       "swe": _set(0.5, 0.0, 1.0, 2, greedy=0.0)})  # fmt: skip
    Curve(run_id="sets", steps=steps, evals=[before, after]).write_json(
        train_dir / "sets" / "curve.json"
    )
    plain = EvalPoint(step=2, weights_version=2, reward_mean=0.5, ci_low=0.1, ci_high=0.9)
    Curve(run_id="plain", steps=steps, evals=[plain]).write_json(train_dir / "plain" / "curve.json")


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[TestClient]:
    write_curves(tmp_path / "train")
    async with open_stores(tmp_path) as (meta, art):
        training = TrainingRuns(art, tmp_path / "train", "train/checkpoints")
        yield TestClient(create_app(meta, art, DashboardAuth(TOKEN), training=training))


def test_the_api_gives_each_held_out_sets_latest_round(client: TestClient) -> None:
    v = client.get("/api/training?id=sets", headers=H).json()
    assert [(s["set"], s["step"], s["weights_version"]) for s in v["heldout_sets"]] == [
        ("qa", 2, 2), ("swe", 2, 2),
    ]  # fmt: skip
    qa = v["heldout_sets"][0]
    assert (qa["reward_mean"], qa["ci_low"], qa["ci_high"], qa["samples"]) == (0.75, 0.3, 1.0, 4)
    assert qa["greedy"] == 1.0
    assert client.get("/api/training?id=plain", headers=H).json()["heldout_sets"] == []
    listed = {r["run"]: r for r in client.get("/api/training", headers=H).json()}
    assert [s["set"] for s in listed["sets"]["heldout_sets"]] == ["qa", "swe"]


def test_a_set_missing_from_the_last_round_keeps_its_own_latest() -> None:
    from megaflow.dashboard.training import heldout_sets

    evals = [
        {"step": 0, "weights_version": 0,
         "sets": {"qa": {"reward_mean": 0.1}, "swe": {"reward_mean": 0.2}}},
        {"step": 4, "weights_version": 4, "sets": {"qa": {"reward_mean": 0.9}}},
        {"step": 5, "weights_version": 5, "sets": None},
    ]  # fmt: skip
    assert [(s["set"], s["step"], s["reward_mean"]) for s in heldout_sets(evals)] == [
        ("qa", 4, 0.9), ("swe", 0, 0.2),
    ]  # fmt: skip


@pytest.fixture
def seeded(tmp_path: Path) -> Path:
    """The curves and empty stores (the dashboard opens an existing database only); set
    up before the browser, whose Playwright runs an event loop of its own."""
    write_curves(tmp_path / "train")

    async def create() -> None:
        async with open_stores(tmp_path):
            pass

    asyncio.run(create())
    return tmp_path


@pytest.mark.slow
def test_the_training_page_shows_each_held_out_set(seeded: Path, browser: Any, shots: Path) -> None:
    with signed_in(browser, seeded) as (page, base):
        page.goto(f"{base}/training?id=sets")
        page.wait_for_selector("#heldout-sets-table")
        rows = page.locator("#heldout-sets-table tr").all_inner_texts()
        assert len(rows) == 3  # the header and one row per set
        assert rows[1].split("\t")[:4] == ["qa", "2", "0.750 [0.300, 1.000]", "4"]
        assert rows[2].split("\t")[:4] == ["swe", "2", "0.500 [0.000, 1.000]", "2"]
        legend = page.locator("#reward-chart").inner_text()
        assert "held-out qa pass@1" in legend
        assert "held-out swe pass@1" in legend
        page.screenshot(path=str(shots / "training-heldout-sets.png"), full_page=True)
        page.goto(f"{base}/training?id=plain")  # no sets: no table, no per-set series
        page.wait_for_selector("#steps-table")
        assert page.locator("#heldout-sets").is_hidden()
        assert "held-out qa" not in page.locator("#reward-chart").inner_text()

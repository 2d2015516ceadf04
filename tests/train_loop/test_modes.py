"""The loop's modes through real sandboxes: async staleness, and no updates."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from megaflow.app.training.loop import TrainLoop
from megaflow.config import parse_config
from megaflow.core.trajectory import ModelCall
from tests.train_loop.conftest import train_config, write_config

pytestmark = pytest.mark.slow


def _calls(art: Path) -> dict[str, list[ModelCall]]:
    """Every stored model call, by the round its task belonged to."""
    out: dict[str, list[ModelCall]] = {}
    for f in art.rglob("trajectory.json"):
        traj = json.loads(f.read_text())
        round_ = traj["task_id"].split("/")[-2].split(".")[1]
        calls = [ModelCall.model_validate(s) for s in traj["steps"] if s["kind"] == "model_call"]
        out.setdefault(round_, []).extend(calls)
    return out


async def test_async_mode_drops_the_samples_older_than_max_staleness(
    tmp_path: Path, policy: Path
) -> None:
    raw = train_config(
        tmp_path, policy, mode="async", lookahead=2, max_staleness=0, stale="drop", steps=3
    )
    raw["scheduler"]["max_concurrency"] = 12  # every round in flight at once
    loop = TrainLoop(parse_config(raw), run_id="tl-async", printer=lambda _: None)
    curve = await loop.run()
    trajs = {}
    for f in (tmp_path / "art").rglob("trajectory.json"):
        t = json.loads(f.read_text())
        trajs[t["task_id"]] = t
    version_before = 0  # the trainer's version when a step begins
    for point in curve.steps:
        oldest = [
            min(c["weights_version"] for c in t["steps"] if c["kind"] == "model_call")
            for tid, t in trajs.items()
            if f".s{point.step:05d}." in tid and t["meta"].get("task_type") == "train"
        ]
        stale = sum(1 for v in oldest if version_before - v > 0)
        assert point.samples == len(oldest) == 4
        assert point.dropped == stale  # each stale sample dropped, no fresh one
        assert point.staleness_max == max(version_before - v for v in oldest)
        version_before = point.weights_version
    assert all(p.kl is None for p in curve.steps)  # kl_coef 0: no KL was measured
    assert curve.steps[0].dropped == 0  # generated with the weights it trains
    assert sum(p.dropped for p in curve.steps[1:]) > 0  # rounds 2, 3 ran ahead on v0
    # A step whose samples were all dropped takes no update.
    versions = [p.weights_version for p in curve.steps]
    assert versions[0] == 1
    assert versions == sorted(versions)
    for prev, point in zip(curve.steps, curve.steps[1:], strict=False):
        took = point.weights_version - prev.weights_version
        assert took == (1 if point.samples - point.dropped >= 2 else 0)


def test_no_updates_keeps_weights_version_0_everywhere(tmp_path: Path, policy: Path) -> None:
    cfg = write_config(tmp_path, train_config(tmp_path, policy, steps=2))
    done = subprocess.run(
        [sys.executable, "-m", "megaflow.cli.main", "train", str(cfg), "--no-updates"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no updates (control)" in done.stdout
    assert "weights v0" in done.stdout
    assert "weights v1" not in done.stdout
    calls = [c for cs in _calls(tmp_path / "art").values() for c in cs]
    assert len(calls) >= 2 * 2 * 2  # two steps of 2 prompts x 2 samples, a call at least each
    assert {c.weights_version for c in calls} == {0}
    (out,) = (tmp_path / "out").iterdir()
    curve = json.loads((out / "curve.json").read_text())
    assert curve["updates"] is False
    assert [s["weights_version"] for s in curve["steps"]] == [0, 0]
    assert all(s["loss"] is None for s in curve["steps"])
    assert (out / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

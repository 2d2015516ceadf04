"""The loop with ``train.weight_sync: {type: disk}``: each update reaches the rollout
model as a versioned checkpoint on disk, and the next rollouts record its version."""

from __future__ import annotations

from pathlib import Path

import pytest
from safetensors.torch import load_file

from megaflow.app.training.loop import TrainLoop
from megaflow.config import parse_config
from tests.train_loop.conftest import train_config
from tests.train_loop.test_modes import _calls

pytestmark = pytest.mark.slow


async def test_the_loop_pushes_each_version_as_a_checkpoint(tmp_path: Path, policy: Path) -> None:
    root = tmp_path / "weights"
    sync = {"type": "disk", "root": str(root), "keep": 1}
    raw = train_config(tmp_path, policy, steps=2, checkpoint_every=0, weight_sync=sync)
    loop = TrainLoop(parse_config(raw), run_id="tl-disk", printer=lambda _: None)
    curve = await loop.run()
    assert [p.weights_version for p in curve.steps] == [1, 2]
    assert len(loop.sync_s) == 2
    assert [p.name for p in (root / "tl-disk").iterdir()] == ["v2"]  # keep: 1
    assert load_file(root / "tl-disk" / "v2" / "model.safetensors")
    rounds = _calls(tmp_path / "art")
    versions = {r: {c.weights_version for c in calls} for r, calls in rounds.items()}
    assert versions["s00001"] == {0}
    assert versions["s00002"] == {1}  # step 2 rolled out on the checkpoint of step 1

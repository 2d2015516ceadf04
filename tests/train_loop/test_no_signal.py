"""A run whose steps have no signal keeps its weights: no update, no push, version 0."""

from __future__ import annotations

from pathlib import Path

import pytest

from megaflow.app.training.loop import TrainLoop
from megaflow.config import parse_config
from tests.train_loop.conftest import train_config

pytestmark = pytest.mark.slow


async def test_steps_without_signal_keep_the_weights_and_push_nothing(
    tmp_path: Path, policy: Path
) -> None:
    # the random policy scores 0 on every sample: every group is flat
    raw = train_config(tmp_path, policy, steps=2, step_without_signal=False)
    lines: list[str] = []
    loop = TrainLoop(parse_config(raw), run_id="tl-flat", printer=lines.append)
    curve = await loop.run()
    assert [p.weights_version for p in curve.steps] == [0, 0]
    assert loop.sync_s == []  # nothing was pushed to the engines
    steps = [line for line in lines if line.startswith("step ")]
    assert len(steps) == 2
    assert all("signal 0/2  no signal: weights kept" in line for line in steps), steps

"""A step whose every sample is lost stops the loop with an error that says why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from megaflow.app.training.loop import TrainLoop
from megaflow.config import parse_config
from megaflow.core.errors import InfraError
from tests.train_loop.conftest import TASKS, train_config

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_step_with_every_sample_lost_is_an_error(
    tmp_path: Path, policy: Path, mode: str
) -> None:
    rows = [json.loads(line) for line in (TASKS / "train.jsonl").read_text().splitlines()[:4]]
    for r in rows:
        r["megaflow_source"]["path"] = "repos/gone"  # as if deleted under a running job
    tasks = tmp_path / "t" / "train.jsonl"
    tasks.parent.mkdir()
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows))
    raw = train_config(tmp_path, policy, mode=mode, steps=3)
    raw["tasks"]["path"] = str(tasks)
    raw["train"]["held_out"]["limit"] = 1
    lines: list[str] = []
    loop = TrainLoop(parse_config(raw), run_id=f"lost-{mode}", printer=lines.append)
    with pytest.raises(InfraError) as err:
        await loop.run()
    msg = str(err.value)
    assert "step 1: all 4 samples were lost" in msg
    assert "repos/gone does not exist" in msg
    assert f"--resume lost-{mode}" in msg
    assert not loop.curve.steps  # no step was recorded as trained

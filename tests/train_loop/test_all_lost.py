"""A step whose every sample is lost stops the loop with an error that says why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from megaflow.app.training.guards import has_signal
from megaflow.app.training.loop import TrainLoop
from megaflow.app.training.rollouts import Batch
from megaflow.config import parse_config
from megaflow.core.errors import InfraError
from megaflow.train.samples import TrainingSample
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


async def test_steps_with_no_graded_signal_stop_the_loop(tmp_path: Path, policy: Path) -> None:
    """Every sample graded 0 (a FAIL_TO_PASS id no test has: the grading works,
    the environment calibrates, nothing can resolve): after
    ``max_steps_without_signal`` such steps the loop stops and says why."""
    rows = [json.loads(line) for line in (TASKS / "train.jsonl").read_text().splitlines()[:4]]
    for r in rows:
        r["FAIL_TO_PASS"] = ["tests/test_settings.py::test_no_such_test"]
        r["megaflow_source"]["path"] = str(TASKS / r["megaflow_source"]["path"])
    tasks = tmp_path / "t" / "train.jsonl"
    tasks.parent.mkdir()
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows))
    raw = train_config(tmp_path, policy, steps=3, max_steps_without_signal=2)
    raw["tasks"].update(path=str(tasks), source_roots=[str(TASKS)])
    raw["train"]["held_out"]["limit"] = 1
    loop = TrainLoop(parse_config(raw), run_id="flat", printer=lambda _: None)
    with pytest.raises(InfraError) as err:
        await loop.run()
    msg = str(err.value)
    assert "steps 1-2: every graded sample scored 0 (rewards seen in step 2: [0.0])" in msg
    assert "--resume flat" in msg
    assert len(loop.curve.steps) == 1  # step 1 trained on nothing and was recorded


def _batch(*groups: list[tuple[float, bool]]) -> Batch:
    return Batch(
        [[TrainingSample.model_construct(reward=r, masked=m) for r, m in g] for g in groups], {}
    )


def test_signal_is_differing_rewards_or_any_earned_one() -> None:
    assert has_signal(_batch([(0.0, False), (1.0, False)]))
    assert has_signal(_batch([(1.0, False), (1.0, False)]))  # converged, not broken
    assert not has_signal(_batch([(0.0, False), (0.0, False)], [(0.0, False)]))
    assert not has_signal(_batch([(0.0, False), (1.0, True)]))  # a masked sample is no reward


async def test_a_held_out_round_with_nothing_graded_says_so(tmp_path: Path, policy: Path) -> None:
    """Every held-out sample lost (its repository gone): the round is recorded
    as having no graded sample, not as a reward of 0.000."""
    rows = [json.loads(line) for line in (TASKS / "heldout.jsonl").read_text().splitlines()[:2]]
    for r in rows:
        r["megaflow_source"]["path"] = "repos/gone"
    held = tmp_path / "h" / "heldout.jsonl"
    held.parent.mkdir()
    held.write_text("".join(json.dumps(r) + "\n" for r in rows))
    raw = train_config(tmp_path, policy, steps=1)
    raw["train"]["held_out"] = {"path": str(held), "limit": 2}
    lines: list[str] = []
    loop = TrainLoop(parse_config(raw), run_id="blind", printer=lines.append)
    curve = await loop.run()
    assert "held-out reward before training: no graded sample, 2 lost (weights v0)" in lines
    assert curve.evals[0].reward_mean is None
    assert curve.evals[0].masked == 2

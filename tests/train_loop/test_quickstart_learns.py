"""The quickstart learns against a control that could fail: a short run through real
sandboxes and grading improves the held-out pass@1, its shuffled-reward control does not.

The policy is the train quickstart's (the tokenizer and model builder, the
warm start on the sloppy teacher's demonstrations, 600 steps), cached between
runs and shared with ``test_learns.py`` (the ``warm_policy`` fixture of
``conftest.py``). Both arms start from it, take the same number of GRPO steps on the
same prompts, and are evaluated on the same held-out tasks (repositories
never trained on); the control's rewards are permuted within each group
before the advantages. Only the direction is asserted: the trained arm ends
above where it started and above the control, and the control gains less
than the trained arm.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from megaflow.app.training.loop import TrainLoop
from megaflow.config.loader import parse_config
from tests.train_loop.conftest import TASKS, train_config

# the warm start (its fixture) and the RL steps: minutes on 2 busy cores
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _config(tmp: Path, policy: Path, **train: Any) -> dict[str, Any]:
    cfg = train_config(
        tmp, policy, prompts_per_step=8, steps=3, lr=1e-3, eval_every=0, eval_samples=2,
        eval_temperature=1.0, held_out={"path": str(TASKS / "heldout.jsonl"), "limit": 16},
        checkpoint_every=0, **train,
    )  # fmt: skip
    cfg["samples"] = 4
    cfg["agent"].update(max_steps=3, completion_tokens=96)
    return cfg


async def test_a_short_run_improves_and_its_shuffled_control_does_not(
    tmp_path: Path, warm_policy: Path
) -> None:
    trained = TrainLoop(
        parse_config(_config(tmp_path / "t", warm_policy)), run_id="qs-t", printer=print
    )
    t_curve = await trained.run()
    control = TrainLoop(
        parse_config(_config(tmp_path / "c", warm_policy, control="shuffled", eval_before=False)),
        run_id="qs-c",
        printer=print,
    )
    c_curve = await control.run()
    assert c_curve.control == "shuffled"
    assert [e.step for e in t_curve.evals] == [0, 3]
    assert [e.step for e in c_curve.evals] == [3]
    before, after, ctl = t_curve.evals[0], t_curve.evals[-1], c_curve.evals[-1]
    assert before.reward_mean is not None
    assert after.reward_mean is not None
    assert ctl.reward_mean is not None
    assert 0 < before.reward_mean < 0.6  # the warm policy starts low, not at zero
    gain = after.reward_mean - before.reward_mean
    assert gain > 0
    assert after.reward_mean > ctl.reward_mean
    assert ctl.reward_mean - before.reward_mean < gain

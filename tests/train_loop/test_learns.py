"""The closed loop learns: the quickstart's warm-started policy, a few real GRPO steps
through sandboxes and grading, and the held-out reward (greedy) goes up.

The policy is the train quickstart's (``megaflow.app.training.quickstart.prepare``:
the tokenizer and model builder, the warm start on the sloppy teacher's
demonstrations), with 600 warm-start steps instead of the quickstart's
1,000, which is enough for the direction: the ``warm_policy`` fixture of
``conftest.py``, built once and shared with ``test_quickstart_learns.py``.
The held-out instances are never trained on. Only the direction is
asserted, not a time: on the quickstart's own run the greedy held-out reward
goes from 0.0 to 1.0 in 4 steps (docs/train.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.train_loop.conftest import TASKS, train_config, write_config

# the warm start (its fixture) and the RL steps: minutes on 2 busy cores
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_greedy_held_out_reward_rises_after_a_few_grpo_steps(
    tmp_path: Path, warm_policy: Path
) -> None:
    cfg = train_config(
        tmp_path, warm_policy, prompts_per_step=8, steps=4, lr=5e-4, eval_temperature=0.0,
        held_out={"path": str(TASKS / "heldout.jsonl"), "limit": 8}, checkpoint_every=0,
    )  # fmt: skip
    cfg["samples"] = 4
    cfg["agent"]["completion_tokens"] = 96
    path = write_config(tmp_path, cfg)
    done = subprocess.run(
        [sys.executable, "-m", "megaflow.cli.main", "train", str(path)],
        capture_output=True, text=True, timeout=900,
        env={**os.environ, "COLUMNS": "200", "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (out,) = (tmp_path / "out").iterdir()
    evals = json.loads((out / "curve.json").read_text())["evals"]
    before, after = evals[0], evals[-1]
    assert [before["step"], after["step"]] == [0, 4]
    assert before["samples"] == after["samples"] == 8
    assert after["reward_mean"] > before["reward_mean"], done.stdout

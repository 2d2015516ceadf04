"""examples/trl_grpo.py: TRL's GRPOTrainer takes two steps on real MegaFlow episodes
(embedded job, local sandboxes, the tiny model behind MegaFlow's model service)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from examples.trl_grpo import train

from megaflow.core.tasks import TaskResult
from megaflow.storage.sqlite import SqliteMetadataStore


@pytest.mark.slow
def test_grpo_trainer_steps_on_megaflow_rollouts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    rollouts, log = train(tmp_path, steps=2, num_generations=2)
    steps = [e for e in log if "loss" in e]
    assert len(steps) == 2
    assert rollouts.rounds == 2
    assert len(rollouts.samples) == 8  # 2 prompts x 2 generations, per step
    # TRL trained on MegaFlow's tokens: its token count is theirs, prompt plus generated
    first = rollouts.samples[:4]
    assert float(steps[0]["num_tokens"]) == sum(len(s.prompt_ids) + s.generated for s in first)
    # multi-turn episodes: fed-back observation tokens are in the sequence, out of the loss
    assert all(0 in s.loss_mask and s.generated > 0 for s in rollouts.samples)
    # step 2 sampled from the weights the trainer pushed after step 1
    assert rollouts.version == 1
    assert {s.weights_version for s in rollouts.samples[:4]} == {0}
    assert {s.weights_version for s in rollouts.samples[4:]} == {1}

    # every episode is a stored MegaFlow sample with its trajectory
    async def stored() -> list[TaskResult]:
        async with SqliteMetadataStore(str(tmp_path / "megaflow.db")) as md:
            (run,) = await md.list_runs()
            return await md.list_results(run.id)

    results = asyncio.run(stored())
    assert len(results) == 8
    assert all(r.artifacts["trajectory"] for r in results)
    traj = json.loads((tmp_path / "artifacts" / results[0].artifacts["trajectory"]).read_text())
    assert traj["meta"]["task_type"] == "train"

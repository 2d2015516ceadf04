"""TRL's GRPOTrainer trained on MegaFlow rollouts, through its ``rollout_func`` hook.

TRL asks for completions of a batch of prompts (each prompt repeated
``num_generations`` times, one GRPO group per prompt). :class:`MegaFlowRollouts`
answers by running each prompt as ``num_generations`` MegaFlow ``train`` tasks
on one long-lived embedded :class:`~megaflow.app.job.Job` (sandbox, agent loop
against MegaFlow's model service, reward), waiting for their groups with
:func:`~megaflow.app.groups.finished_groups`, and handing TRL each sample's
token-exact episode: the first prompt's ids, every later token, the sampler's
logprobs, and the loss mask as TRL's ``env_mask`` (fed-back tool output is
not trained on). The reward is MegaFlow's, passed to the reward function as
the extra field ``megaflow_reward``. Before the rollouts of step ``k`` the
trainer's weights are pushed into MegaFlow's model as version ``k``, so the
episodes are sampled from the policy being trained.

TRL needs a completion for every prompt it sent and would count a missing
reward as 0, so a round with a masked sample (an infrastructure failure, or
an episode without token data) is refused with its reasons, never padded.

Run it on a random tiny model (rewards are 0 there: it shows the wiring,
not learning)::

    python examples/trl_grpo.py --out /tmp/trl-grpo
"""

from __future__ import annotations

import argparse
import asyncio
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from megaflow.app.groups import finished_groups
from megaflow.app.job import Job
from megaflow.config import parse_config
from megaflow.config.models import RunConfig
from megaflow.core.tasks import TaskSpec, TaskType, sample_id
from megaflow.model.client import InProcessModelClient
from megaflow.train.samples import TrainingSample

T = TypeVar("T")


class MegaFlowRollouts:
    """A TRL ``rollout_func``: ``rollouts(prompts, trainer) -> dict`` on a MegaFlow job
    whose event loop runs in a thread of its own (TRL calls the hook synchronously)."""

    def __init__(self, cfg: RunConfig, num_generations: int) -> None:
        self.job = Job(cfg)
        self.num_generations = num_generations
        self.rounds = 0
        self.version = 0
        self.samples: list[TrainingSample] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def __enter__(self) -> MegaFlowRollouts:
        self._thread.start()
        self._call(self.job.start())
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._call(self.job.stop())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()

    def _push_weights(self, trainer: Any) -> None:
        step = int(trainer.state.global_step)
        if step <= self.version:
            return  # the served weights are the trainer's already
        client = self.job.arms[self.job.run_id].model
        assert isinstance(client, InProcessModelClient)
        weights = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
        self._call(client.control.update_weights(weights, step))
        self.version = step

    async def _round(self, prompts: list[str]) -> list[TrainingSample]:
        self.rounds += 1
        run, n = self.job.run_id, self.num_generations
        tasks = [
            TaskSpec(
                id=sample_id(run, f"r{self.rounds}.g{i // n}", i % n), run_id=run,
                type=TaskType.TRAIN, sample=i % n, payload={"prompt": p},
            )
            for i, p in enumerate(prompts)
        ]  # fmt: skip
        await self.job.submit_tasks(tasks)
        by_id: dict[str, TrainingSample] = {}
        async for group in finished_groups(self.job, run, tasks=[t.id for t in tasks]):
            if group.problems:
                raise RuntimeError(f"group {group.group_id} has masked samples: {group.problems}")
            by_id.update({s.sample_id: s for s in group.samples})
        return [by_id[t.id] for t in tasks]

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        self._push_weights(trainer)
        samples = self._call(self._round([str(p) for p in prompts]))
        self.samples.extend(samples)
        return {
            "prompt_ids": [s.prompt_ids for s in samples],
            "completion_ids": [s.completion_ids for s in samples],
            "logprobs": [s.logprobs for s in samples],
            "env_mask": [s.loss_mask for s in samples],
            "megaflow_reward": [s.reward for s in samples],
        }


def megaflow_reward(prompts: list[Any], completions: list[Any], **kw: Any) -> list[float | None]:
    """The reward MegaFlow gave each episode (graded in its own sandbox)."""
    return [float(r) for r in kw["megaflow_reward"]]


def run_config(model_dir: Path, work: Path, prompts: list[str]) -> RunConfig:
    return parse_config(
        {
            "name": "trl-grpo",
            "task_type": "train",
            "tasks": {
                "type": "inline",
                "tasks": [{"id": f"p{i}", "payload": {"prompt": p}} for i, p in enumerate(prompts)],
            },
            "agent": {"type": "builtin", "max_steps": 2, "max_format_errors": 2,
                      "temperature": 1.0, "completion_tokens": 8},
            "model": {"type": "transformers", "model": str(model_dir), "max_new_tokens": 8,
                      "temperature": 1.0},
            "environment": {"runtime": {"type": "local", "root": str(work / "sandboxes")}},
            "storage": {
                "metadata": {"type": "sqlite", "path": str(work / "megaflow.db")},
                "artifacts": {"type": "local", "root": str(work / "artifacts")},
            },
        }
    )  # fmt: skip


def train(
    work: Path, steps: int = 2, num_generations: int = 2
) -> tuple[MegaFlowRollouts, list[dict[str, float]]]:
    """Build a tiny model, then run ``steps`` GRPO steps of TRL on MegaFlow rollouts;
    returns the rollouts and TRL's log of each step."""
    from trl.trainer.grpo_config import GRPOConfig
    from trl.trainer.grpo_trainer import GRPOTrainer

    from datasets import Dataset  # type: ignore[import-untyped]
    from megaflow.model.transformers_lm import build_tiny_model

    model_dir = build_tiny_model(work / "model")
    prompts = ["write a file", "fix the bug"]
    args = GRPOConfig(
        output_dir=str(work / "trl"), max_steps=steps, per_device_train_batch_size=4,
        num_generations=num_generations, learning_rate=1e-3, logging_steps=1,
        report_to="none", save_strategy="no", use_cpu=True, seed=0, disable_tqdm=True,
    )  # fmt: skip
    with MegaFlowRollouts(run_config(model_dir, work, prompts), num_generations) as rollouts:
        trainer = GRPOTrainer(
            model=str(model_dir),
            reward_funcs=megaflow_reward,
            args=args,
            train_dataset=Dataset.from_dict({"prompt": prompts}),
            rollout_func=rollouts,
        )
        trainer.train()
    return rollouts, list(trainer.state.log_history)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="A working directory.")
    parser.add_argument("--steps", type=int, default=2)
    a = parser.parse_args()
    done, log = train(a.out, a.steps)
    for entry in log:
        print(entry)
    print(f"{len(done.samples)} MegaFlow episodes in {done.rounds} rounds; weights v{done.version}")

"""A few GRPO steps on a toy reward move the policy towards it.

The reward is 1 when a completion contains one given word. Rollouts are
sampled from a separate copy of the model (as an inference backend would),
which takes the trainer's weights after every step through
``state_dict_for_inference`` (weight sync in place).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from megaflow.train.config import TrainerConfig
from megaflow.train.launch import start
from megaflow.train.samples import TrainingSample

GROUPS, SAMPLES, LENGTH = 8, 8, 4


def _rollouts(policy: Any, prompt: list[int], target: int, step: int) -> list[list[TrainingSample]]:
    gen = torch.Generator().manual_seed(step)
    ids = torch.tensor([prompt] * (GROUPS * SAMPLES))
    lps = []
    with torch.no_grad():
        for _ in range(LENGTH):
            logits = policy(input_ids=ids, attention_mask=torch.ones_like(ids)).logits[:, -1]
            nxt = torch.multinomial(logits.softmax(-1), 1, generator=gen)
            lps.append(logits.log_softmax(-1).gather(-1, nxt))
            ids = torch.cat([ids, nxt], dim=1)
    completions = ids[:, len(prompt) :].tolist()
    logprobs = torch.cat(lps, dim=1).tolist()
    return [
        [
            TrainingSample(
                sample_id=f"{g}-{i}",
                group_id=str(g),
                run_id="toy",
                prompt_ids=prompt,
                completion_ids=completions[g * SAMPLES + i],
                logprobs=logprobs[g * SAMPLES + i],
                loss_mask=[1] * LENGTH,
                reward=float(target in completions[g * SAMPLES + i]),
            )
            for i in range(SAMPLES)
        ]
        for g in range(GROUPS)
    ]


def _p_target(policy: Any, prompt: list[int], target: int) -> float:
    with torch.no_grad():
        logits = policy(input_ids=torch.tensor([prompt])).logits[0, -1]
        return float(logits.softmax(-1)[target])


def test_grpo_steps_raise_the_rewarded_tokens_probability(tiny_lm: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_lm, local_files_only=True)
    policy = AutoModelForCausalLM.from_pretrained(tiny_lm, local_files_only=True).eval()
    prompt = tok("user : fix the bug\nassistant :")["input_ids"]
    target = tok.convert_tokens_to_ids("patch")
    before = _p_target(policy, prompt, target)
    trainer = start(tiny_lm, TrainerConfig(lr=3e-2, micro_batch=32))
    assert trainer is not None
    rewards = []
    version = 0
    with trainer:
        for step in range(6):
            groups = _rollouts(policy, prompt, target, step)
            rewards.append(sum(s.reward for g in groups for s in g) / (GROUPS * SAMPLES))
            stats = trainer.step(groups)
            version += stats.groups_with_signal > 0  # a step without signal keeps the version
            assert stats.weights_version == version
            assert stats.tokens == (GROUPS * SAMPLES * LENGTH if stats.updated else 0)
            policy.load_state_dict(trainer.state_dict_for_inference())
    after = _p_target(policy, prompt, target)
    final = _rollouts(policy, prompt, target, 99)
    reward_after = sum(s.reward for g in final for s in g) / (GROUPS * SAMPLES)
    print(f"p(target) {before:.4f} -> {after:.4f}; reward {rewards} -> {reward_after}")
    assert after > 2 * before
    assert reward_after > rewards[0]

"""The sampler records the logprobs of the distribution it sampled from.

GRPO's ratio divides the trainer's probability of each sampled token (its
logits divided by ``train.temperature``, which the loop sets to the sampling
temperature) by the sampler's recorded one. On-policy, that ratio must be 1
at any temperature, so the recorded logprob is ``log_softmax(logits / T)``
of the sampled token, not the temperature-1 model's.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from megaflow.model.config import TransformersModelConfig
from megaflow.model.factory import make_model_client
from megaflow.model.transformers_lm import build_tiny_model
from megaflow.train.logprobs import token_logprobs


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-lm"))


@pytest.mark.parametrize("temperature", [0.7, 1.0, 1.3])
async def test_on_policy_ratios_are_one_at_any_temperature(
    tiny_model: Path, temperature: float
) -> None:
    from transformers import AutoModelForCausalLM

    cfg = TransformersModelConfig(model=str(tiny_model), max_new_tokens=12, temperature=temperature)
    async with make_model_client(cfg) as client:
        calls = []
        for seed in range(4):
            out = await client.chat(
                [{"role": "user", "content": "fix the bug in the code"}],
                trajectory_id=f"t{seed}", seed=seed,
            )  # fmt: skip
            assert out.message is not None
            calls += await client.calls(f"t{seed}")
    trainer = AutoModelForCausalLM.from_pretrained(tiny_model).eval()
    worst = 0.0
    for call in calls:
        prompt, new = call.prompt_token_ids or [], call.token_ids or []
        assert new
        ids = torch.tensor([prompt + new])
        with torch.no_grad():
            lp = token_logprobs(trainer, ids, torch.ones_like(ids), temperature)[0]
        mine = lp[len(prompt) - 1 :].tolist()
        for trained, sampled in zip(mine, call.logprobs or [], strict=True):
            worst = max(worst, abs(math.exp(trained - sampled) - 1.0))
    assert worst < 1e-4, f"on-policy ratio off by {worst:.2e} at temperature {temperature}"

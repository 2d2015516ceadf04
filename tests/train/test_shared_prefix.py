"""A micro-batch's shared prompts run once give the whole batch's logprobs, entropy and
gradient, on GPT-2 and Llama, and a trainer step takes the same update with or without."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from megaflow.train import shared_prefix
from megaflow.train.algorithms.batch import Scored, collate
from megaflow.train.config import TrainerConfig
from megaflow.train.launch import start
from megaflow.train.logprobs import logprobs_and_entropy
from megaflow.train.shared_prefix import share_prompts, shared_logprobs, supports
from tests.train.conftest import sample

A, B, C = [3, 4, 5, 6], [7, 8], [9, 10, 11, 12, 13]
ITEMS = [  # groups of 3, 2 and 1 prompts of different lengths; one multi-turn mask
    Scored(sample("a0", 1.0, prompt=A, completion=[14, 15, 16], group="a"), 1.0, 0.1),
    Scored(sample("a1", 0.0, prompt=A, completion=[17], group="a"), -1.0, 0.1),
    Scored(
        sample(
            "a2", 0.0, prompt=A, completion=[18, 19, 20, 21, 22], mask=[1, 1, 0, 0, 1], group="a"
        ),
        -0.5,
        0.1,
    ),
    Scored(sample("b0", 1.0, prompt=B, completion=[23, 24], group="b"), 1.0, 0.1),
    Scored(sample("b1", 0.0, prompt=B, completion=[25, 26, 27, 28], group="b"), -1.0, 0.1),
    Scored(sample("c0", 1.0, prompt=C, completion=[29, 30], group="c"), 0.0, 0.1),
]


def _llama(tmp: Path) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
    )  # fmt: skip
    LlamaForCausalLM(cfg).save_pretrained(tmp)
    return tmp


@pytest.fixture(params=["gpt2", "llama"])
def model(request: pytest.FixtureRequest, tiny_lm: Path, tmp_path: Path) -> Any:
    from transformers import AutoModelForCausalLM

    path = tiny_lm if request.param == "gpt2" else _llama(tmp_path)
    return AutoModelForCausalLM.from_pretrained(path, local_files_only=True).eval()


def test_share_prompts_indexes_each_rows_prompt_and_declines_when_nothing_is_shared() -> None:
    shared = share_prompts(ITEMS)
    assert shared is not None
    assert shared.prompts == [A, B, C]
    assert shared.rows == [0, 0, 0, 1, 1, 2]
    assert share_prompts([ITEMS[0], ITEMS[3], ITEMS[5]]) is None  # every prompt distinct
    no_prompt = Scored(sample("n", 0.0, prompt=[], completion=[5], group="a"), 0.0)
    assert share_prompts([*ITEMS, no_prompt]) is None


def test_shared_prompts_give_the_whole_batchs_logprobs_entropy_and_gradient(model: Any) -> None:
    assert supports(model)
    batch = collate(ITEMS, pad_id=0)
    shared = share_prompts(ITEMS)
    assert shared is not None
    seen: list[int] = []
    forward = model.forward

    def spy(*a: Any, **kw: Any) -> Any:
        seen.append(kw["input_ids"].shape[0] * kw["input_ids"].shape[1])
        return forward(*a, **kw)

    model.forward = spy

    def run(share: bool) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        model.zero_grad()
        if share:
            lp, ent = shared_logprobs(model, batch, shared, 0, 0.7)
        else:
            lp, ent = logprobs_and_entropy(model, batch.input_ids, batch.attention_mask, 0.7)
        (lp * batch.loss_mask * torch.linspace(1, 2, lp.shape[1])).sum().backward()
        return lp.detach(), ent, [p.grad.clone() for p in model.parameters()]

    whole_lp, whole_ent, whole_g = run(False)
    whole_tokens = seen.pop()
    lp, ent, g = run(True)
    assert sum(seen) < whole_tokens  # fewer token positions ran through the model
    where = torch.zeros_like(batch.loss_mask, dtype=torch.bool)
    for i, item in enumerate(ITEMS):  # every completion token's predicted position
        p, c = len(item.sample.prompt_ids), len(item.sample.completion_ids)
        where[i, p - 1 : p - 1 + c] = True
    assert torch.allclose(lp[where], whole_lp[where], atol=1e-5)
    assert torch.allclose(ent[where], whole_ent[where], atol=1e-5)
    assert not lp[~where].any()
    for a, b in zip(g, whole_g, strict=True):
        assert torch.allclose(a, b, atol=1e-5)


def test_a_step_takes_the_same_update_with_and_without_shared_prompts(
    tiny_lm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real = shared_prefix.shared_logprobs

    def counted(*a: Any, **kw: Any) -> Any:
        calls.append(1)
        return real(*a, **kw)

    monkeypatch.setattr("megaflow.train.worker.shared_logprobs", counted)
    groups = [[i.sample for i in ITEMS[:3]], [i.sample for i in ITEMS[3:5]]]

    def trained(share: bool) -> dict[str, torch.Tensor]:
        cfg = TrainerConfig(lr=1e-2, seed=0, temperature=0.7, micro_batch=8, shared_prefix=share)
        trainer = start(tiny_lm, cfg)
        assert trainer is not None
        with trainer:
            assert trainer.step(groups).updated
            return trainer.state_dict_for_inference()

    shared = trained(True)
    assert calls  # the shared path ran
    calls.clear()
    whole = trained(False)
    assert not calls
    assert max(float((shared[k] - whole[k]).abs().max()) for k in whole) < 1e-5

"""The trainer asks the model for logits of the trained positions only: the
logprobs, entropies and the step's weights are those of the whole batch's logits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from megaflow.train import logprobs as lp_mod
from megaflow.train.algorithms.batch import Scored, collate
from megaflow.train.config import TrainerConfig
from megaflow.train.launch import start
from megaflow.train.logprobs import first_scored, logprobs_and_entropy
from tests.train.conftest import sample

# prompts of 4 and 2 tokens, completions of 3 and 4: the first trained position is 1
ITEMS = [
    Scored(sample("a", 1.0, prompt=[3, 4, 5, 6], completion=[7, 8, 9]), 1.0, 0.1),
    Scored(sample("b", 0.0, prompt=[3, 4], completion=[10, 11, 12, 13], group="g"), -1.0, 0.1),
]


def _model(tiny_lm: Path) -> Any:
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    return AutoModelForCausalLM.from_pretrained(tiny_lm, local_files_only=True).eval()


def test_first_scored_is_the_first_column_any_row_trains() -> None:
    batch = collate(ITEMS, pad_id=0)
    assert first_scored(batch.loss_mask) == 1  # row b: prompt of 2, scored from position 1
    assert first_scored(collate(ITEMS[:1], pad_id=0).loss_mask) == 3
    assert first_scored(torch.zeros(2, 5)) == 0


def test_trimmed_logits_give_the_full_batchs_logprobs_entropy_and_gradient(
    tiny_lm: Path,
) -> None:
    model = _model(tiny_lm)
    batch = collate(ITEMS[:1], pad_id=0)  # one row: positions 0-2 are its prompt's
    start = first_scored(batch.loss_mask)
    seen: list[int] = []
    forward = model.forward

    def spy(*a: Any, **kw: Any) -> Any:
        out = forward(*a, **kw)
        seen.append(out.logits.shape[1])
        return out

    model.forward = spy
    full, full_ent = logprobs_and_entropy(model, batch.input_ids, batch.attention_mask, 0.7)
    part, part_ent = logprobs_and_entropy(
        model, batch.input_ids, batch.attention_mask, 0.7, start=start
    )
    width = batch.input_ids.shape[1]
    assert seen == [width, width - start]  # the model computed fewer logits
    assert part.shape == full.shape
    assert torch.allclose(part[:, start:], full[:, start:], atol=1e-6)
    assert torch.allclose(part_ent[:, start:], full_ent[:, start:], atol=1e-6)
    assert not part[:, :start].any()
    assert not part_ent[:, :start].any()

    def grads(start: int) -> list[torch.Tensor]:
        model.zero_grad()
        lp, _ = logprobs_and_entropy(model, batch.input_ids, batch.attention_mask, 0.7, start=start)
        (lp * batch.loss_mask).sum().backward()
        return [p.grad.clone() for p in model.parameters() if p.grad is not None]

    for a, b in zip(grads(0), grads(start), strict=True):
        assert torch.allclose(a, b, atol=1e-6)


def test_a_step_trains_the_same_weights_with_and_without_trimming(
    tiny_lm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    groups = [[i.sample for i in ITEMS]]

    def trained() -> dict[str, torch.Tensor]:
        trainer = start(tiny_lm, TrainerConfig(lr=1e-2, seed=0, temperature=0.7))
        assert trainer is not None
        with trainer:
            trainer.step(groups)
            return trainer.state_dict_for_inference()

    trimmed = trained()
    monkeypatch.setattr("megaflow.train.worker.first_scored", lambda mask: 0)
    whole = trained()
    assert max(float((trimmed[k] - whole[k]).abs().max()) for k in whole) < 1e-6
    assert lp_mod.keeps_logits(_model(tiny_lm))  # GPT-2 takes logits_to_keep

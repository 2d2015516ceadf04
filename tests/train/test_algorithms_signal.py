"""Signal-aware steps on a real model: a step with nothing to learn changes nothing,
and the step's statistics measure what they say."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from megaflow.train.config import TrainerConfig
from megaflow.train.launch import start
from megaflow.train.logprobs import logprobs_and_entropy
from megaflow.train.samples import TrainingSample
from megaflow.train.trainer import Trainer
from tests.train.conftest import sample

LIVE = [[sample("a", 1.0, completion=[5, 6]), sample("b", 0.0, completion=[7, 8])]]
FLAT = [
    [sample("c", 1.0, group="h"), sample("d", 1.0, group="h")],
    [sample("e", 0.0, group="k"), sample("f", 0.0, group="k", masked=True)],
]


def _trainer(tiny_lm: Path, **cfg: object) -> Trainer:
    trainer = start(tiny_lm, TrainerConfig.model_validate({"lr": 1e-2, **cfg}))
    assert trainer is not None
    return trainer


def _weights(trainer: Trainer) -> dict[str, torch.Tensor]:
    return trainer.state_dict_for_inference()


def _moved(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def test_a_step_without_signal_leaves_weights_and_version_unchanged(tiny_lm: Path) -> None:
    with _trainer(tiny_lm) as trainer:
        first = trainer.step(LIVE)
        assert first.updated
        assert first.groups_with_signal == 1
        before = _weights(trainer)
        stats = trainer.step(FLAT)
        assert not stats.updated
        assert stats.skipped_without_signal
        assert stats.groups_with_signal == 0
        assert stats.zero_advantage_groups == 2
        assert (stats.weights_version, stats.step, trainer.weights_version) == (1, 1, 1)
        assert stats.tokens == 0
        assert _moved(before, _weights(trainer)) == 0.0


def test_step_without_signal_true_lets_momentum_move_the_weights(tiny_lm: Path) -> None:
    # what every step did before: AdamW's first moment moves the weights on a zero gradient
    with _trainer(tiny_lm, step_without_signal=True) as trainer:
        trainer.step(LIVE)
        before = _weights(trainer)
        stats = trainer.step(FLAT)
        assert stats.updated
        assert not stats.skipped_without_signal
        assert stats.weights_version == 2
        assert _moved(before, _weights(trainer)) > 1e-4


def _own_samples(tiny_lm: Path) -> list[list[TrainingSample]]:
    """Two groups whose sampler logprobs are the model's own, so the trainer and
    the sampler agree: ratio 1, mismatch 0. One sample is cut off at the limit."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_lm, local_files_only=True).eval()
    out = []
    for g, (prompt, completions) in enumerate(
        [([3, 4], [[5, 6, 7], [8, 9]]), ([10], [[11], [12, 13]])]
    ):
        group = []
        for i, comp in enumerate(completions):
            ids = torch.tensor([prompt + comp])
            with torch.no_grad():
                lp, _ = logprobs_and_entropy(model, ids, torch.ones_like(ids), entropy=False)
            s = sample(f"{g}{i}", float(i), prompt=prompt, completion=comp,
                       logprobs=lp[0, len(prompt) - 1 :].tolist(), group=str(g))  # fmt: skip
            group.append(s.model_copy(update={"truncated": (g, i) == (0, 0)}))
        out.append(group)
    return out


def test_step_stats_measure_ratio_mismatch_entropy_length_and_truncation(tiny_lm: Path) -> None:
    from transformers import AutoModelForCausalLM

    groups = _own_samples(tiny_lm)
    model = AutoModelForCausalLM.from_pretrained(tiny_lm, local_files_only=True).eval()
    ent_sum, tokens = 0.0, 0
    for s in (s for g in groups for s in g):
        ids = torch.tensor([s.tokens])
        with torch.no_grad():
            _, ent = logprobs_and_entropy(model, ids, torch.ones_like(ids))
        ent_sum += float(ent[0, len(s.prompt_ids) - 1 :].sum())
        tokens += len(s.completion_ids)
    with _trainer(tiny_lm) as trainer:
        stats = trainer.step(groups)
    assert stats.updated
    assert stats.groups_with_signal == 2
    assert stats.mean_ratio == pytest.approx(1.0, abs=1e-5)
    assert stats.mismatch == pytest.approx(0.0, abs=1e-6)
    assert stats.clip_fraction == 0.0
    assert stats.entropy == pytest.approx(ent_sum / tokens, rel=1e-5)
    assert stats.entropy > 0
    assert stats.response_length == 2.0  # (3 + 2 + 1 + 2) / 4
    assert stats.truncation_rate == 0.25
    assert stats.grad_norm > 0

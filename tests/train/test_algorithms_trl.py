"""The algorithms' losses and gradients against TRL's ``GRPOTrainer._compute_loss``.

TRL implements GRPO's loss aggregations (``loss_type`` grpo, bnpo, dr_grpo,
dapo), GSPO (``importance_sampling_level='sequence'``), the k3 KL term and
the truncated / masked importance-sampling correction of sampler/trainer
mismatch (``vllm_importance_sampling_mode`` token_truncate / token_mask).
Its loss method is called on a bare trainer whose forward pass is replaced
by fixed logprobs; both sides get the same advantages (the estimators differ
in their epsilon: TRL divides by the sample std + 1e-4), and the loss and
the gradient on every logprob must agree.
"""

from __future__ import annotations

import math
from collections import defaultdict
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from trl.trainer import grpo_trainer as trl_grpo

from megaflow.train.algorithms.algorithm import Algorithm
from megaflow.train.algorithms.batch import collate
from tests.train.conftest import sample
from tests.train.test_algorithms import build

PROMPT = [3, 4]
LENGTHS = [3, 2, 1, 3, 1, 2]  # completion tokens of the six samples
REWARDS = [1.0, 0.0, 0.25, 0.5, 0.0, 0.0]  # two groups of three
C = max(LENGTHS)


def _data() -> tuple[list[list[Any]], torch.Tensor, torch.Tensor, torch.Tensor]:
    """Samples, and per completion position ``[6, C]``: the sampler's logprobs, the
    policy's (noise of std 0.6 around them, so some ratios leave the clip) and the
    mask."""
    gen = torch.Generator().manual_seed(7)
    old = -torch.rand((6, C), generator=gen) * 3
    new = old + torch.randn((6, C), generator=gen) * 0.6
    mask = torch.zeros((6, C))
    for i, n in enumerate(LENGTHS):
        mask[i, :n] = 1
    samples = [
        sample(
            f"s{i}",
            r,
            prompt=PROMPT,
            completion=[5 + i] * n,
            logprobs=old[i, :n].tolist(),
            group=f"g{i // 3}",
        )
        for i, (r, n) in enumerate(zip(REWARDS, LENGTHS, strict=True))
    ]
    return [samples[:3], samples[3:]], old * mask, new * mask, mask


def _ours(
    algo: Algorithm, ref: torch.Tensor | None = None
) -> tuple[float, torch.Tensor, torch.Tensor]:
    groups, _, new, _ = _data()
    batch = collate(algo.prepare(groups).scored, pad_id=0)
    x = new.clone().requires_grad_(True)
    pad = torch.zeros((6, len(PROMPT) - 1))  # positions predicting prompt tokens
    ref_full = None if ref is None else torch.cat([pad, ref], dim=1)
    loss, _ = algo.loss(batch, torch.cat([pad, x], dim=1), ref_logp=ref_full)
    loss.backward()
    assert x.grad is not None
    return loss.item(), x.grad, batch.advantages


def _trl(
    advantages: torch.Tensor,
    *,
    loss_type: str,
    level: str = "token",
    eps: tuple[float, float] = (0.2, 0.2),
    beta: float = 0.0,
    ref: torch.Tensor | None = None,
    is_mode: str | None = None,
    is_clip: tuple[float | None, float | None] = (None, None),
) -> tuple[float, torch.Tensor]:
    _, old, new, mask = _data()
    x = new.clone().requires_grad_(True)
    t: Any = trl_grpo.GRPOTrainer.__new__(trl_grpo.GRPOTrainer)
    acc = SimpleNamespace(
        gather=lambda v: v, reduce=lambda v, reduction: v, num_processes=1, sync_gradients=True
    )
    t.__dict__.update(
        top_entropy_quantile=1.0, off_policy_mask_threshold=None,
        importance_sampling_level=level, beta=beta, loss_type=loss_type,
        epsilon_low=eps[0], epsilon_high=eps[1], use_vllm=is_mode is not None,
        vllm_importance_sampling_correction=is_mode is not None,
        args=SimpleNamespace(delta=None, use_bias_correction_kl=False, steps_per_generation=1),
        model=SimpleNamespace(training=True), current_gradient_accumulation_steps=1,
        max_completion_length=C, _entropy_bonus_enabled=False, aux_loss_enabled=False,
        accelerator=acc, _metrics=defaultdict(lambda: defaultdict(list)),
        _get_per_token_logps_and_entropies=lambda *a, **k: (x, torch.zeros_like(x), None),
    )  # fmt: skip
    inputs: dict[str, Any] = {
        "prompt_ids": torch.tensor([PROMPT] * 6), "prompt_mask": torch.ones((6, 2)),
        "completion_ids": torch.zeros((6, C), dtype=torch.long), "completion_mask": mask,
        "advantages": advantages, "old_per_token_logps": old,
        "num_items_in_batch": mask.sum(),
    }  # fmt: skip
    if ref is not None:
        inputs["ref_per_token_logps"] = ref
    if is_mode is not None:  # TRL's own recipe: the trainer's logprobs are the PPO base
        inputs["old_per_token_logps"] = x.detach()
        diff = (x.detach() - old) * mask
        if is_mode.startswith("sequence"):
            diff = diff.sum(-1, keepdim=True)
        ratio = torch.exp(diff)
        lo, hi = is_clip
        if is_mode.endswith("truncate"):
            ratio = ratio.clamp(min=lo, max=hi)
        else:
            out = (ratio < (lo or -math.inf)) | (ratio > (hi or math.inf))
            ratio = ratio.masked_fill(out, 0.0)
        inputs["importance_sampling_ratio"] = ratio
    loss = trl_grpo.GRPOTrainer._compute_loss(t, None, inputs)
    loss.backward()
    assert x.grad is not None
    return float(loss.item()), x.grad


CASES = [
    ({"type": "grpo", "loss_agg": "sequence"}, {"loss_type": "grpo"}),
    ({"type": "grpo"}, {"loss_type": "bnpo"}),
    ({"type": "grpo"}, {"loss_type": "dapo"}),
    ({"type": "dr_grpo", "max_tokens": C}, {"loss_type": "dr_grpo"}),
    ({"type": "dapo", "dynamic_sampling": False}, {"loss_type": "dapo", "eps": (0.2, 0.28)}),
    ({"type": "gspo"}, {"loss_type": "grpo", "level": "sequence", "eps": (3e-4, 4e-4)}),
    (
        {"type": "gspo", "clip_eps": 0.2, "clip_eps_high": 0.2},
        {"loss_type": "grpo", "level": "sequence"},
    ),
    (
        {"type": "grpo", "correction": {"type": "tis", "cap": 2.0}},
        {"loss_type": "bnpo", "is_mode": "token_truncate", "is_clip": (None, 2.0)},
    ),
    (
        {"type": "grpo", "correction": {"type": "icepop", "low": 0.5, "high": 2.0}},
        {"loss_type": "bnpo", "is_mode": "token_mask", "is_clip": (0.5, 2.0)},
    ),
    (
        {"type": "grpo", "correction": {"type": "tis", "cap": 2.0, "level": "sequence"}},
        {"loss_type": "bnpo", "is_mode": "sequence_truncate", "is_clip": (None, 2.0)},
    ),
    (
        {
            "type": "grpo",
            "correction": {"type": "icepop", "low": 0.5, "high": 2.0, "level": "sequence"},
        },
        {"loss_type": "bnpo", "is_mode": "sequence_mask", "is_clip": (0.5, 2.0)},
    ),
    ({"type": "rloo"}, {"loss_type": "bnpo"}),
    ({"type": "reinforce_pp", "baseline": "group"}, {"loss_type": "bnpo"}),
]


@pytest.mark.parametrize(("ours", "theirs"), CASES, ids=lambda c: str(c))
def test_loss_and_gradient_match_trl(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    loss, grad, adv = _ours(build(**ours))
    assert adv.abs().sum() > 0
    ref_loss, ref_grad = _trl(adv, **theirs)
    assert loss == pytest.approx(ref_loss, rel=1e-5, abs=1e-7)
    assert torch.allclose(grad, ref_grad, rtol=1e-5, atol=1e-7)
    assert grad.abs().sum() > 0  # the comparison is not of two zero gradients


def test_kl_term_matches_trl() -> None:
    _, _, new, mask = _data()
    ref = (new + 0.3 * torch.sin(torch.arange(6.0 * C).view(6, C))) * mask
    loss, grad, adv = _ours(build(type="grpo", loss_agg="sequence", kl_coef=0.04), ref=ref)
    ref_loss, ref_grad = _trl(adv, loss_type="grpo", beta=0.04, ref=ref)
    assert loss == pytest.approx(ref_loss, rel=1e-5)
    assert torch.allclose(grad, ref_grad, rtol=1e-5, atol=1e-7)


def test_some_ratios_leave_the_clip_so_the_clip_is_compared() -> None:
    _, old, new, mask = _data()
    ratio = torch.exp(new - old)[mask.bool()]
    assert bool(((ratio < 0.8) | (ratio > 1.2)).any())
    assert bool(((ratio > 0.8) & (ratio < 1.2)).any())
    assert bool((ratio > 2.0).any() | (ratio < 0.5).any())  # and the TIS/IcePop bounds

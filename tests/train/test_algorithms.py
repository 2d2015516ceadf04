"""Each algorithm of ``train.algorithm`` against a small batch worked out by hand.

The numbers are derived in the comments (and in :func:`_batch`'s docstring);
``tests/train/test_algorithms_trl.py`` checks the same losses against TRL.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from megaflow.train.algorithms.algorithm import STAT_FIELDS, Algorithm
from megaflow.train.algorithms.batch import PaddedBatch, collate
from megaflow.train.algorithms.options import OverlongPenalty
from megaflow.train.config import TrainerConfig
from megaflow.train.samples import TrainingSample
from tests.train.conftest import sample


def build(**algorithm: Any) -> Algorithm:
    kl = algorithm.pop("kl_coef", 0.0)
    cfg = TrainerConfig.model_validate({"algorithm": algorithm, "kl_coef": kl})
    return cfg.algorithm.build(kl_coef=cfg.kl_coef)


def advantages(algo: Algorithm, groups: list[list[TrainingSample]]) -> list[float]:
    return [s.advantage for s in algo.prepare(groups).scored]


def stats(sums: torch.Tensor) -> dict[str, float]:
    return dict(zip(STAT_FIELDS, sums.tolist(), strict=True))


ONE_ZERO_ZERO = [sample("a", 1.0), sample("b", 0.0), sample("c", 0.0)]


# -- advantages -------------------------------------------------------------------


def test_grpo_scales_by_the_group_std_and_dr_grpo_does_not() -> None:
    # rewards (1, 0, 0): mean 1/3, population std sqrt(2/9) = sqrt(2)/3
    grpo = advantages(build(type="grpo", std_eps=1e-12), [ONE_ZERO_ZERO])
    assert grpo == pytest.approx([math.sqrt(2), -1 / math.sqrt(2), -1 / math.sqrt(2)])
    dr = advantages(build(type="dr_grpo", max_tokens=4), [ONE_ZERO_ZERO])
    assert dr == pytest.approx([2 / 3, -1 / 3, -1 / 3])


def test_rloo_subtracts_the_mean_of_the_other_samples() -> None:
    # a: 1 - mean(0, 0) = 1; b: 0 - mean(1, 0) = -0.5; c likewise
    assert advantages(build(type="rloo"), [ONE_ZERO_ZERO]) == pytest.approx([1.0, -0.5, -0.5])


def test_reinforce_pp_normalises_over_the_whole_batch() -> None:
    both = [sample("d", 1.0, group="h"), sample("e", 1.0, group="h")]
    # batch baseline: values (1, 0, 0, 1, 1), mean 0.6, population std sqrt(0.24);
    # the all-1 group keeps a positive advantage (it beat the batch)
    batch = advantages(build(type="reinforce_pp", std_eps=1e-12), [ONE_ZERO_ZERO, both])
    hi, lo = 0.4 / math.sqrt(0.24), -0.6 / math.sqrt(0.24)
    assert batch == pytest.approx([hi, lo, lo, hi, hi])
    # group baseline: (2/3, -1/3, -1/3, 0, 0), mean 0, std sqrt((4 + 1 + 1) / 9 / 5)
    group = build(type="reinforce_pp", baseline="group", std_eps=1e-12)
    std = math.sqrt(6 / 45)
    assert advantages(group, [ONE_ZERO_ZERO, both]) == pytest.approx(
        [2 / 3 / std, -1 / 3 / std, -1 / 3 / std, 0.0, 0.0]
    )


def test_groups_with_signal_and_dynamic_sampling() -> None:
    flat = [sample("d", 1.0, group="h"), sample("e", 1.0, group="h")]
    long = [sample("f", 0.0, group="k", completion=[5] * 6), sample("g", 0.0, group="k")]
    grpo = build(type="grpo").prepare([ONE_ZERO_ZERO, flat, long])
    assert grpo.groups_with_signal == 1
    assert grpo.zero_advantage_groups == 2
    assert len(grpo.scored) == 7  # zero-advantage samples stay, diluting the token mean
    assert grpo.scored[0].weight == pytest.approx(1 / (2 * 6 + 6))  # 6 samples of 2, one of 6
    dapo = build(type="dapo").prepare([ONE_ZERO_ZERO, flat, long])
    assert dapo.filtered_groups == 2
    assert [s.sample.sample_id for s in dapo.scored] == ["a", "b", "c"]
    assert dapo.scored[0].weight == pytest.approx(1 / 6)  # only the 6 tokens of the signal group


# -- DAPO's overlong handling --------------------------------------------------------


def test_soft_overlong_penalty_is_linear_in_the_cache_band() -> None:
    pen = OverlongPenalty(max_tokens=10, cache_tokens=4)
    # 0 up to 10 - 4 = 6 tokens, then (6 - L) / 4 down to -1 at 10, -1 beyond
    assert [pen.penalty(n) for n in (5, 6, 7, 8, 10, 11)] == [0, 0, -0.25, -0.5, -1, -1]


def test_overlong_penalty_shapes_the_reward_and_the_filter_drops_truncated_samples() -> None:
    short = sample("s", 1.0, completion=[5] * 2)
    long = sample("l", 1.0, completion=[5] * 8).model_copy(update={"truncated": True})
    algo = build(
        type="dapo",
        overlong_penalty={"max_tokens": 10, "cache_tokens": 4},
        std_eps=1e-12,
    )
    # rewards seen: 1 and 1 - 0.5 = 0.5; GRPO: mean 0.75, std 0.25 -> +1, -1
    prep = algo.prepare([[short, long]])
    assert [s.advantage for s in prep.scored] == pytest.approx([1.0, -1.0])
    assert prep.truncation_rate == 0.5
    assert prep.response_length == 5.0
    filtered = build(
        type="dapo",
        overlong_filter=True,
        overlong_penalty={"max_tokens": 10, "cache_tokens": 4},
    ).prepare([[short, long]])
    assert [s.sample.sample_id for s in filtered.scored] == ["s"]
    assert filtered.overlong_filtered == 1
    assert filtered.scored[0].weight == pytest.approx(1 / 2)  # only s's tokens


# -- losses ---------------------------------------------------------------------------


def _batch(algo: Algorithm) -> tuple[PaddedBatch, torch.Tensor]:
    """Two samples of one group, rewards 1 and 0: GRPO advantages +1 and -1 (std
    0.5). Sample a has trained tokens at predicted positions 0 and 2 (position 1 is
    an observation), sample b one at position 1. The new logprobs make the ratios
    new/sampler 1.5 and 0.9 (a) and 0.7 (b)."""
    s1 = sample("a", 1, prompt=[5], completion=[6, 7, 8], mask=[1, 0, 1], logprobs=[-1, 0, -2])
    s2 = sample("b", 0, prompt=[5, 9], completion=[10], logprobs=[-0.5])
    batch = collate(algo.prepare([[s1, s2]]).scored, pad_id=1)
    logp = torch.tensor(
        [[-1 + math.log(1.5), 3.0, -2 + math.log(0.9)], [9.0, -0.5 + math.log(0.7), 9.0]],
        requires_grad=True,
    )
    return batch, logp


def test_dr_grpo_divides_the_token_sum_by_a_constant() -> None:
    algo = build(type="dr_grpo", max_tokens=4)
    batch, logp = _batch(algo)
    # advantages +-0.5; a: max(-0.5*1.5, -0.5*1.2) = -0.6, -0.5*0.9 = -0.45;
    # b: max(0.5*0.7, 0.5*0.8) = 0.4. Sum -0.65 over 2 samples * 4 tokens.
    loss, _ = algo.loss(batch, logp)
    assert loss.item() == pytest.approx((-0.6 - 0.45 + 0.4) / 8, rel=1e-6)


def test_dapo_clips_higher_at_one_point_two_eight() -> None:
    algo = build(type="dapo", std_eps=1e-12)
    batch, logp = _batch(algo)
    # a's 1.5 is now clipped at 1.28, not 1.2; b's 0.7 still at 0.8; token mean
    loss, sums = algo.loss(batch, logp)
    assert loss.item() == pytest.approx((-1.28 - 0.9 + 0.8) / 3, rel=1e-6)
    assert stats(sums)["clipped"] == 2


def test_gspo_clips_one_length_normalised_ratio_per_sequence() -> None:
    algo = build(type="gspo", std_eps=1e-12, clip_eps=0.2, clip_eps_high=0.5)
    batch, logp = _batch(algo)
    # a: exp((log 1.5 + log 0.9) / 2) = sqrt(1.35), inside (0.8, 1.5): -sqrt(1.35);
    # b: 0.7 -> clipped at 0.8: +0.8. Mean over the two sequences.
    loss, sums = algo.loss(batch, logp)
    s_a = math.sqrt(1.35)
    assert loss.item() == pytest.approx((-s_a + 0.8) / 2, rel=1e-6)
    assert stats(sums)["clipped"] == 1  # b's one token
    loss.backward()
    assert logp.grad is not None
    # d(-s_a)/d logp_t = -s_a / 2 (two tokens), times the sequence weight 1/2
    assert logp.grad[0, 0].item() == pytest.approx(-s_a / 4, rel=1e-6)
    assert logp.grad[0, 2].item() == pytest.approx(-s_a / 4, rel=1e-6)
    assert logp.grad[1, 1].item() == 0.0  # clipped
    tight = build(type="gspo", std_eps=1e-12)  # the paper's 3e-4 / 4e-4
    loss, _ = tight.loss(*_batch(tight))
    assert loss.item() == pytest.approx((-1.0004 + 0.9997) / 2, abs=1e-7)  # float32


def test_dual_clip_bounds_a_negative_advantage_and_the_log_ratio_is_clamped() -> None:
    algo = build(type="grpo", std_eps=1e-12, dual_clip=3.0)
    batch, _ = _batch(algo)
    # b (A = -1) at ratio 5: PPO takes max(5, 0.8) = 5; the dual clip caps it at 3
    logp = torch.tensor([[-1.0, 0.0, -2.0], [0.0, -0.5 + math.log(5.0), 0.0]], requires_grad=True)
    loss, sums = algo.loss(batch, logp)
    assert loss.item() == pytest.approx((-1.0 - 1.0 + 3.0) / 3, rel=1e-6)
    assert stats(sums)["clipped"] == 1
    plain, _ = build(type="grpo", std_eps=1e-12).loss(batch, logp)
    assert plain.item() == pytest.approx((-1.0 - 1.0 + 5.0) / 3, rel=1e-6)
    # a log ratio of 50 counts as 20 (exp(50) would dominate any step)
    huge = torch.tensor([[-1.0, 0.0, -2.0], [0.0, 49.5, 0.0]], requires_grad=True)
    loss, _ = build(type="grpo", std_eps=1e-12).loss(batch, huge)
    assert loss.item() == pytest.approx((-2.0 + math.exp(20.0)) / 3, rel=1e-6)
    loss.backward()
    assert huge.grad is not None
    assert huge.grad[1, 1].item() == 0.0


def test_tis_caps_the_sampler_trainer_weight_and_reports_the_mismatch() -> None:
    algo = build(type="grpo", std_eps=1e-12, correction={"type": "tis", "cap": 1.2})
    batch, logp = _batch(algo)
    # the ratio is against the trainer's own logprobs (1, so no PPO clip); each token's
    # loss is multiplied by min(pi_trainer / pi_sampler, 1.2): 1.2, 0.9 (a), 0.7 (b)
    loss, sums = algo.loss(batch, logp)
    assert loss.item() == pytest.approx((-1.2 - 0.9 + 0.7) / 3, rel=1e-6)
    got = stats(sums)
    assert got["corrected"] == 1
    assert got["clipped"] == 0
    assert got["ratio"] == pytest.approx(1.5 + 0.9 + 0.7, rel=1e-6)
    k3 = sum(w - 1 - math.log(w) for w in (1.5, 0.9, 0.7))  # KL(sampler || trainer)
    assert got["mismatch"] == pytest.approx(k3, rel=1e-5)
    loss.backward()
    assert logp.grad is not None
    assert logp.grad[0, 2].item() == pytest.approx(-0.9 / 3, rel=1e-6)  # -A * w / tokens
    seq = build(
        type="grpo", std_eps=1e-12, correction={"type": "tis", "cap": 1.2, "level": "sequence"}
    )
    # one weight per sequence: a's 1.5 * 0.9 = 1.35 -> 1.2 on both tokens, b's 0.7
    loss, _ = seq.loss(*_batch(seq))
    assert loss.item() == pytest.approx((-1.2 - 1.2 + 0.7) / 3, rel=1e-6)


def test_icepop_masks_tokens_outside_the_band() -> None:
    algo = build(type="grpo", std_eps=1e-12, correction={"type": "icepop", "low": 0.8, "high": 1.4})
    batch, logp = _batch(algo)
    # 1.5 and 0.7 fall outside [0.8, 1.4] and leave the loss; 0.9 keeps its weight
    loss, sums = algo.loss(batch, logp)
    assert loss.item() == pytest.approx(-0.9 / 3, rel=1e-6)
    assert stats(sums)["corrected"] == 2
    loss.backward()
    assert logp.grad is not None
    assert logp.grad[0, 0].item() == 0.0
    assert logp.grad[1, 1].item() == 0.0


def test_entropy_sums_over_trained_tokens_only() -> None:
    algo = build(type="grpo")
    batch, logp = _batch(algo)
    ent = torch.tensor([[1.0, 100.0, 2.0], [100.0, 4.0, 100.0]])
    _, sums = algo.loss(batch, logp, entropy=ent)
    assert stats(sums)["entropy"] == pytest.approx(7.0)

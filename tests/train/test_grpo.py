"""GRPO (the default algorithm): advantages, padding and loss against numbers
worked out by hand, unchanged from before the algorithm seam."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from megaflow.train.algorithms.algorithm import STAT_FIELDS, Algorithm, Prepared
from megaflow.train.algorithms.batch import PaddedBatch, Scored, collate
from megaflow.train.algorithms.config import GrpoConfig
from megaflow.train.batching import micro_batches, plan
from megaflow.train.logprobs import token_logprobs
from megaflow.train.samples import TrainingSample
from tests.train.conftest import sample


def _grpo(kl_coef: float = 0.0, **knobs: object) -> Algorithm:
    return GrpoConfig.model_validate(knobs).build(kl_coef=kl_coef)


def _advantages(groups: list[list[TrainingSample]], **kw: object) -> Prepared:
    return _grpo(**kw).prepare(groups)


def test_advantages_exclude_masked_samples_and_scale_by_std() -> None:
    group = [sample("a", 1.0), sample("b", 0.0), sample("c", 0.0), sample("m", 5.0, masked=True)]
    plain = _advantages([group], scale_std=False)
    assert [s.sample.sample_id for s in plain.scored] == ["a", "b", "c"]
    assert [s.advantage for s in plain.scored] == pytest.approx([2 / 3, -1 / 3, -1 / 3])
    assert plain.masked_samples == 1
    assert plain.zero_advantage_groups == 0
    scaled = _advantages([group], scale_std=True)
    std = math.sqrt(2 / 9)  # population std of (1, 0, 0)
    expected = [(2 / 3) / (std + 1e-6), (-1 / 3) / (std + 1e-6), (-1 / 3) / (std + 1e-6)]
    assert [s.advantage for s in scaled.scored] == pytest.approx(expected)


def test_equal_rewards_give_zero_advantage_and_are_counted() -> None:
    same = [sample("a", 1.0), sample("b", 1.0), sample("m", 0.0, masked=True)]
    alone = [sample("c", 1.0), sample("d", 0.0, masked=True)]
    live = [sample("e", 1.0), sample("f", 0.0)]
    adv = _advantages([same, alone, live], scale_std=True)
    by_id = {s.sample.sample_id: s.advantage for s in adv.scored}
    assert by_id["a"] == by_id["b"] == by_id["c"] == 0.0
    assert by_id["e"] == pytest.approx(1.0, rel=1e-5)
    assert adv.zero_advantage_groups == 2
    assert adv.masked_samples == 2


def test_sample_weight_scales_the_advantage_and_untrained_samples_drop_out() -> None:
    group = [sample("a", 1.0, weight=0.25), sample("b", 0.0), sample("n", 0.5, mask=[0, 0])]
    adv = _advantages([group], scale_std=False)
    by_id = {s.sample.sample_id: s.advantage for s in adv.scored}
    assert set(by_id) == {"a", "b"}  # "n" generated nothing, but counted in the mean (0.5)
    assert by_id["a"] == pytest.approx(0.5 * 0.25)
    assert by_id["b"] == pytest.approx(-0.5)


def test_collate_puts_completion_tokens_at_their_predicting_position() -> None:
    s1 = sample("a", 1, prompt=[5], completion=[6, 7, 8], mask=[1, 0, 1], logprobs=[-1, 0, -2])
    s2 = sample("b", 0, prompt=[5, 9], completion=[10], logprobs=[-0.5])
    b = collate([Scored(s1, 1.0, 0.5), Scored(s2, -1.0, 0.25)], pad_id=1)
    assert b.input_ids.tolist() == [[5, 6, 7, 8], [5, 9, 10, 1]]
    assert b.attention_mask.tolist() == [[1, 1, 1, 1], [1, 1, 1, 0]]
    assert b.loss_mask.tolist() == [[1, 0, 1], [0, 1, 0]]
    assert b.old_logprobs.tolist() == [[-1, 0, -2], [0, -0.5, 0]]
    assert b.advantages.tolist() == [1.0, -1.0]


def _hand_batch(agg: str) -> tuple[PaddedBatch, torch.Tensor]:
    """Two samples of one group, rewards 1 and 0 (advantages +1 and -1). New
    logprobs make the ratios 1.5 and 0.9 (sample a) and 0.7 (sample b)."""
    s1 = sample("a", 1, prompt=[5], completion=[6, 7, 8], mask=[1, 0, 1], logprobs=[-1, 0, -2])
    s2 = sample("b", 0, prompt=[5, 9], completion=[10], logprobs=[-0.5])
    scored = _advantages([[s1, s2]], std_eps=1e-12, loss_agg=agg).scored
    batch = collate(scored, pad_id=1)
    logp = torch.tensor(
        [[-1 + math.log(1.5), 3.0, -2 + math.log(0.9)], [9.0, -0.5 + math.log(0.7), 9.0]],
        requires_grad=True,
    )
    return batch, logp


@pytest.mark.parametrize(
    ("agg", "expected"),
    [
        # tokens: a@0 clipped at 1.2 -> -1.2; a@2 -> -0.9; b@1 clipped at 0.8 -> +0.8
        ("token", (-1.2 - 0.9 + 0.8) / 3),
        ("sequence", ((-1.2 - 0.9) / 2 + 0.8) / 2),
    ],
)
def test_loss_matches_hand_computation(agg: str, expected: float) -> None:
    batch, logp = _hand_batch(agg)
    loss, sums = _grpo().loss(batch, logp)
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    stats = dict(zip(STAT_FIELDS, sums.tolist(), strict=True))
    assert stats["tokens"] == 3
    assert stats["clipped"] == 2
    assert stats["ratio"] == pytest.approx(1.5 + 0.9 + 0.7, rel=1e-5)
    loss.backward()
    grad = logp.grad
    assert grad is not None
    # a clipped token passes no gradient; masked positions never do
    assert grad[0, 0].item() == 0.0
    assert grad[1, 1].item() == 0.0
    assert grad[0, 1].item() == grad[1, 0].item() == grad[1, 2].item() == 0.0
    weight_a = 1 / 3 if agg == "token" else 1 / 4
    assert grad[0, 2].item() == pytest.approx(-0.9 * weight_a, rel=1e-5)  # d(-A*r)/dlogp


def test_upper_clip_and_kl_term() -> None:
    batch, logp = _hand_batch("token")
    loss, sums = _grpo(clip_eps_high=0.6).loss(batch, logp)
    assert loss.item() == pytest.approx((-1.5 - 0.9 + 0.8) / 3, rel=1e-5)
    assert sums[STAT_FIELDS.index("clipped")].item() == 1  # only b's 0.7 < 0.8
    ref = logp.detach() + 0.1
    with_kl, sums = _grpo(clip_eps_high=0.6, kl_coef=0.5).loss(batch, logp, ref_logp=ref)
    k3 = math.exp(0.1) - 0.1 - 1
    assert with_kl.item() == pytest.approx(loss.item() + 0.5 * k3, rel=1e-5)
    assert sums[STAT_FIELDS.index("kl")].item() == pytest.approx(3 * k3, rel=1e-4)


def test_token_logprobs_on_a_padded_batch_match_each_sequence_alone(tiny_lm: Path) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_lm, local_files_only=True).eval()
    seqs = [[3, 4, 5, 6, 7], [8, 9], [10, 11, 12]]
    ids = torch.full((3, 5), 1, dtype=torch.long)
    attn = torch.zeros((3, 5), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
        attn[i, : len(s)] = 1
    with torch.no_grad():
        batched = token_logprobs(model, ids, attn)
        for i, s in enumerate(seqs):
            one = torch.tensor([s])
            logits = model(input_ids=one).logits[0, :-1].log_softmax(-1)
            alone = logits[torch.arange(len(s) - 1), one[0, 1:]]
            assert torch.allclose(batched[i, : len(s) - 1], alone, atol=1e-5)


def test_plan_gives_every_rank_the_same_number_of_micro_batches() -> None:
    items = [Scored(sample(f"s{i}", 0, completion=[5] * (i + 1)), 0.0) for i in range(5)]
    ranks = plan(items, world_size=2, size=1, unit="samples")
    assert [len(r) for r in ranks] == [3, 3]
    assert ranks[1][-1] is None  # rank 1 has two samples and one empty pass
    ids = sorted(s.sample.sample_id for r in ranks for mb in r if mb for s in mb)
    assert ids == sorted(f"s{i}" for i in range(5))
    by_tokens = micro_batches(items[::-1], 12, "tokens")  # lengths 7, 6, 5, 4, 3
    # 7 + 6 would pad to 2 x 7 = 14 > 12; 6 + 5 pads to 12
    assert [[len(s.sample.tokens) for s in mb] for mb in by_tokens] == [[7], [6, 5], [4, 3]]

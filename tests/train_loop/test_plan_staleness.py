"""The planned prompt sequence and the staleness policy, on their own."""

from __future__ import annotations

import pytest

from megaflow.app.training.plan import PromptPlan
from megaflow.app.training.rollouts import round_name
from megaflow.app.training.staleness import apply_staleness
from megaflow.train.samples import TrainingSample


def test_each_epoch_is_a_shuffle_of_every_prompt_and_batches_tile_the_sequence() -> None:
    ids = tuple(f"p{i}" for i in range(5))
    plan = PromptPlan(ids, prompts_per_step=2, steps=6, seed=3)
    seq = plan.sequence()
    assert len(seq) == 12
    assert sorted(seq[:5]) == sorted(ids)
    assert sorted(seq[5:10]) == sorted(ids)
    assert [p for s in range(1, 7) for p in plan.batch(s)] == seq
    assert PromptPlan(ids, 2, 6, seed=3).sequence() == seq  # the same after a restart
    assert PromptPlan(ids, 2, 6, seed=4).sequence() != seq
    with pytest.raises(ValueError, match="outside"):
        plan.batch(7)


def test_rounds_of_two_incarnations_never_share_a_name() -> None:
    assert round_name("aa", 3) == "aa.s00003"
    assert round_name("aa", 3, held_out=True) == "aa.e00003"
    assert round_name("bb", 3) != round_name("aa", 3)


def _sample(i: int, version: int | None, reward: float = 1.0) -> TrainingSample:
    return TrainingSample(
        sample_id=f"s{i}", group_id="g", run_id="r", prompt_ids=[1], completion_ids=[2],
        logprobs=[-0.5], loss_mask=[1], reward=reward, weights_version=version,
    )  # fmt: skip


def test_drop_leaves_out_samples_beyond_the_bound_and_groups_left_too_small() -> None:
    fresh = [_sample(0, 4), _sample(1, 3, 0.0), _sample(2, 1)]
    old = [_sample(3, 1), _sample(4, 4)]
    kept, rep = apply_staleness([fresh, old], 4, max_staleness=1, stale="drop")
    assert [[s.sample_id for s in g] for g in kept] == [["s0", "s1"]]
    assert rep.samples == 5
    assert rep.dropped == 3  # s2 and s3 are stale; s4 is alone in its group
    assert rep.groups_dropped == 1
    assert rep.staleness_max == 3


def test_reweight_keeps_stale_samples_with_a_decayed_weight() -> None:
    group = [_sample(0, 5), _sample(1, 2), _sample(2, None)]
    kept, rep = apply_staleness([group], 5, max_staleness=1, stale="reweight", decay=0.5)
    weights = {s.sample_id: s.weight for s in kept[0]}
    assert weights == {"s0": 1.0, "s1": 0.25, "s2": 0.5**4}  # None counts as version 0
    assert rep.reweighted == 2
    assert rep.dropped == 0

"""The shuffled-reward control: each group's rewards permuted among its graded samples."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

from megaflow.app.training.control import apply_control, shuffle_rewards
from megaflow.app.training.loop import TrainLoop
from megaflow.config import parse_config
from megaflow.train.samples import TrainingSample
from tests.train_loop.conftest import train_config


def _sample(g: int, n: int, reward: float, masked: bool = False) -> TrainingSample:
    return TrainingSample(
        sample_id=f"r/t{g}/{n}", group_id=f"r/t{g}", run_id="r", prompt_ids=[1, 2],
        completion_ids=[] if masked else [3, n], logprobs=[] if masked else [-0.5, -0.5],
        loss_mask=[] if masked else [1, 1], reward=0.0 if masked else reward, masked=masked,
    )  # fmt: skip


def _groups() -> list[list[TrainingSample]]:
    rewards = [[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 0, 1], [1, 1, 1, 0]] * 4
    return [[_sample(g, n, float(r)) for n, r in enumerate(rs)] for g, rs in enumerate(rewards)]


def test_rewards_stay_in_their_group_but_leave_their_samples() -> None:
    groups = _groups()
    shuffled = shuffle_rewards(groups, random.Random(0))
    moved = 0
    for before, after in zip(groups, shuffled, strict=True):
        # same samples (tokens), same multiset of rewards: the group's statistics are kept
        assert [s.completion_ids for s in after] == [s.completion_ids for s in before]
        assert Counter(s.reward for s in after) == Counter(s.reward for s in before)
        moved += sum(a.reward != b.reward for a, b in zip(before, after, strict=True))
    assert moved > 0  # the pairing of rewards and samples is broken
    assert [s.reward for s in groups[0]] == [1, 0, 0, 0]  # the input is not modified


def test_masked_samples_keep_their_place_and_take_no_reward() -> None:
    group = [_sample(0, 0, 1.0), _sample(0, 1, 0.0, masked=True), _sample(0, 2, 0.0)]
    for seed in range(20):
        (out,) = shuffle_rewards([group], random.Random(seed))
        assert out[1].masked
        assert out[1].reward == 0.0
        assert sorted(s.reward for s in (out[0], out[2])) == [0.0, 1.0]


def test_the_permutation_is_fixed_by_seed_and_step_and_none_changes_nothing() -> None:
    groups = _groups()

    def rewards(gs: list[list[TrainingSample]]) -> list[list[float]]:
        return [[s.reward for s in g] for g in gs]

    a = apply_control("shuffled", groups, seed=3, step=2)
    assert rewards(a) == rewards(apply_control("shuffled", groups, seed=3, step=2))
    assert rewards(a) != rewards(apply_control("shuffled", groups, seed=3, step=3))
    assert rewards(apply_control("none", groups, seed=3, step=2)) == rewards(groups)


async def test_a_control_run_records_its_control_and_its_held_out_figures(
    tmp_path: Path, policy: Path
) -> None:
    """Through the real loop (sandboxes, grading) with the random policy: the curve says
    which control it ran, the held-out rounds have their sampled and greedy samples, and
    the random policy's answers, which carry no tool call, are counted malformed."""
    raw = train_config(
        tmp_path, policy, steps=1, control="shuffled", eval_samples=2, eval_temperature=1.0,
        eval_greedy=True, checkpoint_every=0, max_steps_without_signal=None,
    )  # fmt: skip
    lines: list[str] = []
    curve = await TrainLoop(parse_config(raw), run_id="ctl", printer=lines.append).run()
    assert curve.control == "shuffled"
    assert [e.step for e in curve.evals] == [0, 1]
    for e in curve.evals:
        assert (e.samples, e.greedy_samples, e.masked) == (4, 2, 0)
        assert len(e.per_prompt) == 2
        assert e.malformed == 1.0
        assert e.greedy_malformed == 1.0
        assert e.reward_mean == e.greedy == 0.0
        assert e.ci_low == 0.0
        assert e.ci_high is not None
        assert e.ci_high > 0.5  # two prompts tell little
    assert any(line.startswith("held-out reward before training: pass@1 0.000 [") for line in lines)
    assert "greedy 0.000 over 2" in lines[-1]

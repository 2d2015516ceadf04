"""The mixed run's sampler: each set's share follows its weight, a step never
draws a task twice, and the curriculum skips always- and never-solved tasks
after N graded samples (lifting the skip when every task is skipped)."""

from __future__ import annotations

from collections import Counter

import pytest
from pydantic import ValidationError

from megaflow.app.training.sampler import SetSampler
from megaflow.train.loop_config import TrainingConfig
from megaflow.train.task_sets import CurriculumConfig

SETS = {"a": [f"a.{i}" for i in range(6)], "b": [f"b.{i}" for i in range(3)]}


def _set(key: str) -> str:
    return key.split(".")[0]


def test_shares_follow_the_weights_exactly_and_every_step() -> None:
    s = SetSampler(SETS, {"a": 3.0, "b": 1.0}, per_step=4, seed=1)
    counts: Counter[str] = Counter()
    for step in range(1, 11):
        batch = s.draw(step)
        assert len(batch) == len(set(batch)) == 4  # no task twice in a step
        per = Counter(_set(k) for k in batch)
        assert per == {"a": 3, "b": 1}
        counts.update(per)
    assert counts == {"a": 30, "b": 10}


def test_fractional_shares_add_up_over_steps() -> None:
    s = SetSampler(SETS, {"a": 1.0, "b": 2.0}, per_step=2, seed=0)
    counts = Counter(_set(k) for step in range(1, 31) for k in s.draw(step))
    assert counts == {"a": 20, "b": 40}


def test_every_task_of_a_set_comes_up_before_any_comes_twice() -> None:
    s = SetSampler(SETS, {"a": 1.0, "b": 1.0}, per_step=2, seed=3)
    b_tasks = [k for step in range(1, 7) for k in s.draw(step) if _set(k) == "b"]
    assert sorted(b_tasks[:3]) == SETS["b"]
    assert sorted(b_tasks[3:6]) == SETS["b"]


def test_the_draw_is_the_same_for_the_same_seed() -> None:
    def draws(seed: int) -> list[list[str]]:
        s = SetSampler(SETS, {"a": 1.0, "b": 1.0}, per_step=3, seed=seed)
        return [s.draw(step) for step in range(1, 6)]

    assert draws(7) == draws(7)
    assert draws(7) != draws(8)


def test_a_set_short_of_tasks_gives_its_slots_to_the_others() -> None:
    s = SetSampler(SETS, {"a": 1.0, "b": 100.0}, per_step=5, seed=0)
    batch = s.draw(1)
    assert Counter(_set(k) for k in batch) == {"b": 3, "a": 2}


def test_the_curriculum_skips_solved_and_unsolved_tasks_after_n_attempts() -> None:
    s = SetSampler(
        SETS, {"a": 1.0, "b": 1.0}, per_step=4, seed=0, curriculum=CurriculumConfig(min_attempts=4)
    )
    s.observe("a.0", [1.0, 1.0, 1.0])  # 3 < 4 graded: not yet skipped
    assert not s.skipped("a.0")
    s.observe("a.0", [1.0])
    s.observe("a.1", [0.0] * 4)
    s.observe("a.2", [0.0, 1.0, 0.0, 1.0])  # half solved: kept
    s.observe("a.3", [float("nan")] * 8)  # masked samples are not attempts
    assert s.skipped("a.0")
    assert s.skipped("a.1")
    assert not s.skipped("a.2")
    assert not s.skipped("a.3")
    drawn = Counter(k for step in range(1, 41) for k in s.draw(step))
    assert drawn["a.0"] == drawn["a.1"] == 0
    assert drawn["a.2"] > 0
    assert not s.lifted
    # tasks near a pass rate of one half weigh most; an unseen one is tried
    assert s.task_weight("a.2") > s.task_weight("a.0")
    assert s.task_weight("a.4") == pytest.approx(0.25)


def test_a_set_whose_tasks_are_all_skipped_gives_its_share_away() -> None:
    s = SetSampler(
        SETS, {"a": 1.0, "b": 1.0}, per_step=2, seed=0, curriculum=CurriculumConfig(min_attempts=1)
    )
    for k in SETS["b"]:
        s.observe(k, [1.0])
    batches = [s.draw(step) for step in range(1, 6)]
    assert all(_set(k) == "a" for b in batches for k in b)
    assert all(len(b) == 2 for b in batches)


def test_when_every_task_is_skipped_the_skip_is_lifted_and_said() -> None:
    s = SetSampler(
        SETS, {"a": 1.0, "b": 1.0}, per_step=2, seed=0, curriculum=CurriculumConfig(min_attempts=1)
    )
    for k in SETS["a"] + SETS["b"]:
        s.observe(k, [0.0])
    assert len(s.draw(1)) == 2
    assert s.lifted == [1]


def test_sets_config_rules() -> None:
    base = {"held_out": {"path": "h.jsonl"}}
    one = {"name": "a", "path": "a.jsonl", "type": "jsonl"}
    TrainingConfig.model_validate({**base, "sets": [one], "curriculum": {"min_attempts": 2}})
    with pytest.raises(ValidationError, match="used twice"):
        TrainingConfig.model_validate({**base, "sets": [one, one]})
    with pytest.raises(ValidationError, match="curriculum applies with sets only"):
        TrainingConfig.model_validate({**base, "curriculum": {}})
    with pytest.raises(ValidationError, match="sets replace train_split"):
        TrainingConfig.model_validate({**base, "sets": [one], "train_split": {"limit": 2}})
    with pytest.raises(ValidationError, match="weight"):
        TrainingConfig.model_validate({**base, "sets": [{**one, "weight": 0}]})
    with pytest.raises(ValidationError, match="name"):
        TrainingConfig.model_validate({**base, "sets": [{**one, "name": "Bad Name"}]})


def _curriculum_run(s: SetSampler, steps: range) -> list[list[str]]:
    """Draw ``steps``, observing rewards that depend only on the task: a.0 and
    b.0 always pass, a.1 never, the rest half the time."""
    out = []
    for step in steps:
        batch = s.draw(step)
        for key in batch:
            reward = {"a.0": 1.0, "b.0": 1.0, "a.1": 0.0}.get(key)
            s.observe(key, [1.0, 0.0] if reward is None else [reward] * 2)
        out.append(batch)
    return out


def test_a_resumed_curriculum_draws_as_the_uninterrupted_one() -> None:
    import json

    def sampler() -> SetSampler:
        cfg = CurriculumConfig(min_attempts=2)
        return SetSampler(SETS, {"a": 2.0, "b": 1.0}, per_step=3, seed=5, curriculum=cfg)

    whole = sampler()
    _curriculum_run(whole, range(1, 7))
    saved = json.loads(json.dumps(whole.state()))  # what a checkpoint keeps
    after = _curriculum_run(whole, range(7, 21))

    resumed = sampler()
    resumed.load(saved)
    assert _curriculum_run(resumed, range(7, 21)) == after
    # without the saved counts the draws differ: the skipped tasks come back
    assert _curriculum_run(sampler(), range(7, 21)) != after
    with pytest.raises(ValueError, match="other tasks or sets"):
        SetSampler({"c": ["c.0"]}, {"c": 1.0}, per_step=1).load(saved)

"""Dynamic sampling's refill: unit cases on scripted rounds, and the loop in async mode."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from megaflow.app.training.loop import TrainLoop
from megaflow.app.training.refill import draw, flat, refill_step
from megaflow.app.training.rollouts import Batch, Rollouts
from megaflow.config import parse_config
from megaflow.core.tasks import TaskType
from megaflow.datasets.instance import SWEInstance
from megaflow.datasets.loader import load_instances
from tests.train.conftest import sample
from tests.train_loop.conftest import TASKS, train_config

POOL = load_instances(TASKS / "train.jsonl")


def _group(iid: str, rewards: Sequence[float]) -> list:  # type: ignore[type-arg]
    return [sample(f"{iid}/{n}", r, group=iid) for n, r in enumerate(rewards)]


class Scripted:
    """Rounds whose prompts in ``signal`` get rewards (1, 0), the others (0, 0)."""

    def __init__(self, signal: set[str]) -> None:
        self.signal = signal
        self.rounds: dict[str, list[str]] = {}

    async def submit(
        self, name: str, instances: Sequence[SWEInstance], samples: int, task_type: TaskType,
        priority: int = 0, temperature: float | None = None,
    ) -> None:  # fmt: skip
        assert (samples, task_type, priority) == (2, TaskType.TRAIN, 1)
        self.rounds[name] = [i.instance_id for i in instances]

    async def collect(self, name: str) -> Batch:
        ids = self.rounds[name]
        return Batch([_group(i, (1.0, 0.0) if i in self.signal else (0.0, 0.0)) for i in ids])


def test_flat_groups_are_those_whose_graded_rewards_are_equal() -> None:
    assert flat(_group("a", (0.0, 0.0)))
    assert not flat(_group("a", (1.0, 0.0)))
    one = _group("a", (1.0, 0.0))
    one[1] = one[1].model_copy(update={"masked": True})
    assert flat(one)  # a single graded sample


async def test_refill_brings_the_groups_with_signal_up_to_the_batch() -> None:
    ids = [i.instance_id for i in POOL]
    step_ids = ids[:4]
    first = Batch([_group(step_ids[0], (1.0, 0.0))] + [_group(i, (0.0, 0.0)) for i in step_ids[1:]])
    # one prompt of signal in each refill round's draw
    r1 = draw(POOL, set(step_ids), 4, seed=0, step=3, round_=1)
    r2 = draw(POOL, set(step_ids) | {i.instance_id for i in r1}, 4, seed=0, step=3, round_=2)
    rounds = Scripted({r1[0].instance_id, r2[0].instance_id, r2[1].instance_id})
    lines: list[str] = []
    got = await refill_step(
        rounds, first, name="x.s00003", pool=POOL, used=set(step_ids), need=4, rounds=3,
        samples=2, seed=0, step=3, say=lines.append,
    )  # fmt: skip
    assert list(rounds.rounds) == ["x.s00003r1", "x.s00003r2"]  # stopped once full
    assert (got.rounds, got.prompts, got.with_signal) == (2, 8, 4)
    assert got.drawn == tuple(i.instance_id for i in r1 + r2)
    signal = [g[0].group_id for g in got.batch.groups if not flat(g)]
    assert signal == [step_ids[0], r1[0].instance_id, r2[0].instance_id, r2[1].instance_id]
    assert len(got.batch.groups) == 4 + 3 + 3 + 2  # and every flat group, for the trainer
    seen = [i for r in rounds.rounds.values() for i in r]
    assert len(set(seen)) == len(seen)
    assert not set(seen) & set(step_ids)  # never the step's own prompts
    assert lines == ["step 3: refilled in 2 round(s) of 4 prompts: 4/4 groups with signal"]


async def test_refill_stops_after_its_rounds_and_does_nothing_when_full() -> None:
    ids = [i.instance_id for i in POOL][:2]
    none = Scripted(set())
    flat_batch = Batch([_group(i, (0.0, 0.0)) for i in ids])
    got = await refill_step(
        none, flat_batch, name="x.s00001", pool=POOL, used=set(ids), need=2, rounds=2,
        samples=2, seed=0, step=1, say=lambda _: None,
    )  # fmt: skip
    assert (got.rounds, got.with_signal, len(none.rounds)) == (2, 0, 2)
    full = Batch([_group(i, (1.0, 0.0)) for i in ids])
    got = await refill_step(
        none, full, name="x.s00001", pool=POOL, used=set(ids), need=2, rounds=2,
        samples=2, seed=0, step=1, say=lambda _: None,
    )  # fmt: skip
    assert (got.rounds, got.batch) == (0, full)


def _lucky(instance_id: str) -> bool:
    return hashlib.sha1(instance_id.encode()).digest()[0] % 2 == 0


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["async", "sync"])
async def test_the_loop_refills_every_step_to_its_batch(
    tmp_path: Path, policy: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """The rollouts, sandboxes, grading and trainer are real; the rewards are then set
    by a rule (half the prompts get (1, 0, ...), the rest stay flat), as the random
    policy itself scores 0 everywhere."""
    real = Rollouts.collect

    async def collect(self: Rollouts, name: str) -> Batch:
        got = await real(self, name)
        for group in got.groups:
            lucky = _lucky(group[0].group_id.rsplit(".", 1)[-1])
            group[:] = [
                s.model_copy(update={"reward": float(lucky and n == 0)})
                for n, s in enumerate(group)
            ]
        return got

    monkeypatch.setattr(Rollouts, "collect", collect)
    raw = train_config(
        tmp_path, policy, mode=mode, steps=2, checkpoint_every=0,
        **({"lookahead": 1} if mode == "async" else {}),
        step_without_signal=False, algorithm={"type": "dapo", "refill_rounds": 4},
    )  # fmt: skip
    lines: list[str] = []
    loop = TrainLoop(parse_config(raw), run_id="tl-refill", printer=lines.append)
    curve = await loop.run()
    steps = [line for line in lines if line.startswith("step ") and "/2  reward" in line]
    assert len(steps) == 2
    for line in steps:  # two groups of signal each step, out of its groups and the refills'
        assert "  signal 2/" in line, lines
        assert "  filtered " in line
    refills = [line for line in lines if "refilled in" in line]
    assert refills, lines
    assert all(line.endswith("2/2 groups with signal") for line in refills)
    assert [p.weights_version for p in curve.steps] == [1, 2]
    for point in curve.steps:  # the refills' prompts are the step's too, none of its own
        assert point.refill_prompts
        assert not set(point.refill_prompts) & set(point.prompts)
    rounds = {
        json.loads(f.read_text())["task_id"].split("/")[-2].split(".")[1]
        for f in (tmp_path / "art").rglob("trajectory.json")
    }
    assert any("r1" in r for r in rounds)  # the refill rounds ran through the scheduler

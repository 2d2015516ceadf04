"""Dynamic sampling's refill: a step whose groups lack signal gets more groups.

With ``train.algorithm.dynamic_sampling`` the trainer leaves out every group
whose advantages are all 0, so a step of ``prompts_per_step`` groups may
train on few of them. :func:`refill_step` keeps the groups whose graded
rewards differ (a flat group teaches a group baseline nothing) and, while
fewer than ``prompts_per_step`` have signal, rolls out up to
``refill_rounds`` extra rounds of ``prompts_per_step`` new prompts with the
current weights, at priority +1 so they run before the rollouts of later
steps already queued in ``async`` mode. Groups with signal beyond
``prompts_per_step`` are left out (DAPO fills the batch, no more); the flat
groups go to the trainer too, which filters and counts them.

Refill prompts come from the train split, drawn by a generator seeded with
the run's seed, the step and the round, never the step's own prompts nor an
earlier round's (while the split has others). The planned sequence and its
cursor are untouched, so a resumed run plans the same steps.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from megaflow.app.training.rollouts import Batch
from megaflow.core.tasks import TaskType
from megaflow.datasets.instance import SWEInstance
from megaflow.train.samples import TrainingSample


class Rounds(Protocol):
    """What the refill needs of :class:`~megaflow.app.training.rollouts.Rollouts`."""

    async def submit(
        self,
        name: str,
        instances: Sequence[SWEInstance],
        samples: int,
        task_type: TaskType,
        priority: int = 0,
        temperature: float | None = None,
    ) -> object: ...

    async def collect(self, name: str) -> Batch: ...


def flat(group: Sequence[TrainingSample]) -> bool:
    """Whether a group carries no signal: its graded rewards are all equal (or it
    has fewer than two graded samples)."""
    return len({s.reward for s in group if not s.masked}) < 2


@dataclass(frozen=True, slots=True)
class Refilled:
    batch: Batch
    rounds: int  # extra rounds rolled out
    prompts: int  # extra prompts rolled out
    with_signal: int  # groups with signal the step trains on
    drawn: tuple[str, ...] = ()  # instance ids of the extra prompts, in the order drawn


def draw(
    pool: Sequence[SWEInstance], used: set[str], n: int, *, seed: int, step: int, round_: int
) -> list[SWEInstance]:
    """``n`` prompts of ``pool`` not in ``used`` (all of them if fewer remain), in an
    order fixed by the seed, the step and the round."""
    fresh = [i for i in pool if i.instance_id not in used] or list(pool)
    random.Random(f"{seed}:refill:{step}:{round_}").shuffle(fresh)
    return fresh[:n]


async def refill_step(
    rollouts: Rounds,
    batch: Batch,
    *,
    name: str,
    pool: Sequence[SWEInstance],
    used: set[str],
    need: int,
    rounds: int,
    samples: int,
    seed: int,
    step: int,
    say: Callable[[str], None] = print,
) -> Refilled:
    """``batch`` with its groups of signal refilled up to ``need`` (see the module)."""
    keep = [g for g in batch.groups if not flat(g)]
    flats = [g for g in batch.groups if flat(g)]
    problems = dict(batch.problems)
    used = set(used)
    done = asked = 0
    drawn: list[str] = []
    while len(keep) < need and done < rounds:
        done += 1
        insts = draw(pool, used, need, seed=seed, step=step, round_=done)
        used |= {i.instance_id for i in insts}
        asked += len(insts)
        drawn += [i.instance_id for i in insts]
        extra = f"{name}r{done}"
        await rollouts.submit(extra, insts, samples, TaskType.TRAIN, priority=1)
        got = await rollouts.collect(extra)
        problems.update(got.problems)
        keep += [g for g in got.groups if not flat(g)]
        flats += [g for g in got.groups if flat(g)]
    if done:
        say(
            f"step {step}: refilled in {done} round(s) of {need} prompts: "
            f"{min(len(keep), need)}/{need} groups with signal"
        )
    return Refilled(
        Batch(keep[:need] + flats, problems), done, asked, min(len(keep), need), tuple(drawn)
    )

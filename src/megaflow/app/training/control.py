"""Controls of a training run: the same loop with the learning signal destroyed.

``train.control: shuffled`` (``megaflow train CONFIG --control shuffled``)
permutes the graded rewards within each group before the trainer sees them,
so every sample keeps its tokens, its group and the group's reward
statistics (mean, spread, how many succeeded) but its advantage no longer
says whether *it* did well. The rollouts, the prompts, the number and size
of the updates and the held-out rounds are those of a real run. If the
held-out score of a real run rises and that of its shuffled control does
not, the reward's pairing with the samples caused the rise, not the updates
as such nor which prompts were batched.

The permutation of step ``s`` is drawn from ``Random(f"{seed}:{s}")``, so a
resumed control permutes as the uninterrupted one would. Masked samples
(lost to the infrastructure, no reward) stay where they are.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Literal

from megaflow.train.samples import TrainingSample

Control = Literal["none", "shuffled"]
Group = list[TrainingSample]


def shuffle_rewards(groups: Sequence[Group], rng: random.Random) -> list[Group]:
    """Each group with the rewards of its graded samples permuted among them."""
    out: list[Group] = []
    for group in groups:
        live = [i for i, s in enumerate(group) if not s.masked]
        rewards = [group[i].reward for i in live]
        rng.shuffle(rewards)
        new = list(group)
        for i, r in zip(live, rewards, strict=True):
            new[i] = group[i].model_copy(update={"reward": r})
        out.append(new)
    return out


def apply_control(control: Control, groups: Sequence[Group], seed: int, step: int) -> list[Group]:
    """The groups step ``step`` trains on under ``control`` (unchanged for ``none``)."""
    if control == "none":
        return list(groups)
    return shuffle_rewards(groups, random.Random(f"{seed}:{step}"))

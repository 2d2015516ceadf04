"""The planned sequence of prompts: which train prompts each step uses.

The prompts of a training run are fixed before it starts: epoch after epoch
over the train split, each epoch a shuffle seeded by the run's seed and the
epoch number. Step ``s`` (from 1) trains on ``sequence[(s-1)*P : s*P]``, so
the loop's whole position is one integer, the cursor (prompts consumed by
committed steps), and a resumed run computes the same batches again.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class PromptPlan:
    """Which train prompts each step uses."""

    ids: tuple[str, ...]
    prompts_per_step: int
    steps: int
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.ids:
            raise ValueError("the train split has no task")

    def sequence(self) -> list[str]:
        """Every prompt of the run, in training order."""
        need = self.prompts_per_step * self.steps
        out: list[str] = []
        epoch = 0
        while len(out) < need:
            order = list(self.ids)
            random.Random(f"{self.seed}:{epoch}").shuffle(order)
            out += order
            epoch += 1
        return out[:need]

    def batch(self, step: int) -> list[str]:
        """The prompts of ``step`` (1-based)."""
        if not 1 <= step <= self.steps:
            raise ValueError(f"step {step} is outside 1..{self.steps}")
        p = self.prompts_per_step
        return self.sequence()[(step - 1) * p : step * p]

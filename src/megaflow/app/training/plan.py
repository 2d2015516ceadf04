"""The planned sequence of prompts, and the task specs of one step's rollouts.

The prompts of a training run are fixed before it starts: epoch after epoch
over the train split, each epoch a shuffle seeded by the run's seed and the
epoch number. Step ``s`` (from 1) trains on ``sequence[(s-1)*P : s*P]``, so
the loop's whole position is one integer, the cursor (prompts consumed by
committed steps), and a resumed run computes the same batches again.

Rollouts of one step are one scheduler run (``<run>-<incarnation>-s<step>``;
held-out rounds ``...-e<step>``): waiting for a step's groups is waiting for
its run, and a resumed process, a new incarnation, never meets the task ids
of the one it replaces.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from megaflow.core.tasks import TaskSpec, TaskType, Timeouts
from megaflow.datasets.instance import SWEInstance
from megaflow.datasets.task_specs import to_task_specs


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


def rollout_run_id(run_id: str, incarnation: str, step: int, *, held_out: bool = False) -> str:
    return f"{run_id}-{incarnation}-{'e' if held_out else 's'}{step:05d}"


def batch_specs(
    instances: Sequence[SWEInstance],
    run_id: str,
    samples: int,
    task_type: TaskType,
    *,
    priority: int,
    max_attempts: int,
    deadline_s: float,
) -> list[TaskSpec]:
    """One task per instance and sample: ``samples`` of an instance form its group.
    Held-out rounds run before the next step's rollouts (``priority`` + 1)."""
    return to_task_specs(
        instances,
        run_id,
        samples,
        task_type,
        priority=priority,
        max_attempts=max_attempts,
        timeouts=Timeouts(deadline_s=deadline_s),
    )

"""What stops a training run that has nothing to learn from.

The loop calls these on each step's collected batch, before the trainer
sees it: :func:`check_usable` stops a step whose every sample was lost to
the infrastructure, :func:`check_signal` a run whose grading has told
nothing (every reward 0) for ``train.max_steps_without_signal`` steps in a
row, as :func:`has_signal` judges a step. Each raises
:class:`~megaflow.core.errors.InfraError` with the cause and the
``--resume`` that continues the run once it is fixed.
"""

from __future__ import annotations

from megaflow.app.training.rollouts import Batch
from megaflow.core.errors import InfraError


def check_usable(batch: Batch, step: int, run_id: str) -> None:
    """A step whose every sample was lost has nothing to train on, and the next steps
    would lose theirs the same way (a missing repository, a broken image): stop."""
    total = sum(len(g) for g in batch.groups)
    if total and batch.masked == total:
        sid, why = next(iter(batch.problems.items()), ("", "no graded result"))
        raise InfraError(
            f"step {step}: all {total} samples were lost before grading, so there is "
            f"nothing to train on; the first, {sid}: {why}. Fix the cause and continue "
            f"with --resume {run_id}"
        )


def has_signal(batch: Batch) -> bool:
    """Whether the step's grading told anything: some group's graded rewards
    differ (GRPO learns only from those), or some sample earned reward (a
    policy that solves every task has converged; its grader works)."""
    for group in batch.groups:
        rewards = {s.reward for s in group if not s.masked}
        if len(rewards) > 1 or any(r > 0 for r in rewards):
            return True
    return False


def check_signal(batch: Batch, flat: int, step: int, limit: int | None, run_id: str) -> None:
    """Steps without signal in a row: a grading environment that scores every
    sample 0 (a broken image, a runner that never starts) would otherwise keep
    the loop running on nothing."""
    if limit is None or flat < limit:
        return
    rewards = sorted({round(r, 3) for r in batch.rewards})
    raise InfraError(
        f"steps {step - flat + 1}-{step}: every graded sample scored 0 (rewards seen in "
        f"step {step}: {rewards or 'none'}), so there was nothing to learn from for "
        f"{flat} steps in a row. Check the grading (megaflow logs, a task's grade.json) or "
        f"raise train.max_steps_without_signal; continue with --resume {run_id}"
    )

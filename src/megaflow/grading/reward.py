"""The reward rule, written once.

:func:`reward_of` is what a grade report is worth; :func:`sample_reward` what
a stored sample is worth to a trainer or a held-out mean. The attempt, the
training data and the rollouts all call these, so no two places can disagree
on what a tampered grade, an agent's own failure or a lost sample earns.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from megaflow.core.states import TaskState
from megaflow.core.tasks import TaskResult
from megaflow.grading.abstract import Report


def reward_of(report: Report) -> float:
    """The reward of a grade report: 0 when it was tampered with, else its reward
    clamped to [0, 1] (a NaN or a non-number is 0)."""
    if report.tampered:
        return 0.0
    return clamp(report.reward)


def clamp(value: object) -> float:
    """``value`` as a reward in [0, 1]; anything that is not a finite number is 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    x = float(value)
    return 0.0 if not math.isfinite(x) else min(max(x, 0.0), 1.0)


def combined(rewards: Mapping[str, float]) -> float:
    """One reward from named ones: the one named ``reward`` if there is one (as
    Harbor's ``reward.json`` has), else their mean; none is 0."""
    if "reward" in rewards:
        return clamp(rewards["reward"])
    values = [clamp(v) for v in rewards.values()]
    return sum(values) / len(values) if values else 0.0


def sample_reward(state: TaskState, result: TaskResult | None) -> float | None:
    """What a stored sample is worth: its graded reward when its task ended
    SUCCEEDED (the app's attempt returns an agent's own failure that way, with
    reward 0); otherwise ``None``, masked, never 0: it has no graded result (an
    infrastructure failure past its retries, a deadline, a cancellation, or an
    executor other than the app's that raised ``AgentError``;
    docs/training-data.md)."""
    if result is None or state is not TaskState.SUCCEEDED:
        return None
    return result.reward

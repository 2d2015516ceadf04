"""Grading: the seam that turns an attempt's final state into a reward.

``abstract`` holds the :class:`Grader` protocol and the report types,
``config`` one config per grader (``grading.type``), ``reward`` the one
reward rule; ``swebench``, ``script``, ``python_fn`` and ``judge`` are the graders.
See docs/tasks-format.md.
"""

from megaflow.grading.abstract import Grader, GradingAttempt, Report, Taken, Verdict
from megaflow.grading.config import (
    GraderConfig,
    JudgeGraderConfig,
    PythonGraderConfig,
    ScriptGraderConfig,
    SwebenchGraderConfig,
)
from megaflow.grading.reward import reward_of, sample_reward

__all__ = [
    "Grader",
    "GraderConfig",
    "GradingAttempt",
    "JudgeGraderConfig",
    "PythonGraderConfig",
    "Report",
    "ScriptGraderConfig",
    "SwebenchGraderConfig",
    "Taken",
    "Verdict",
    "reward_of",
    "sample_reward",
]

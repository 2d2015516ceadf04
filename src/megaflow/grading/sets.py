"""The ``sets`` grader: each task graded by its task set's own grader.

A train run with ``train.sets`` tags every task's payload with its set's
name (``megaflow_set``); this grader hands each task to that set's grader,
and every other task (a held-out round's, say) to the run's own. It adds
nothing of its own: what a task's grader reports is its report.
"""

from __future__ import annotations

from megaflow.core.tasks import TaskSpec
from megaflow.environment.abstract import EnvironmentSpec
from megaflow.grading.abstract import FreshSandbox, Grader, GradingAttempt

SET_KEY = "megaflow_set"
"""The payload key naming a task's set."""


class SetsGrader:
    def __init__(self, graders: dict[str, Grader], default: Grader) -> None:
        self.graders = graders
        self.default = default

    def of(self, task: TaskSpec) -> Grader:
        """The grader of ``task``'s set, or the default one."""
        name = task.payload.get(SET_KEY)
        return self.graders.get(name, self.default) if isinstance(name, str) else self.default

    def grades(self, task: TaskSpec) -> bool:
        return self.of(task).grades(task)

    def sandbox_spec(self, task: TaskSpec, base: EnvironmentSpec) -> EnvironmentSpec:
        return self.of(task).sandbox_spec(task, base)

    def attempt(self, task: TaskSpec, spec: EnvironmentSpec, fresh: FreshSandbox) -> GradingAttempt:
        return self.of(task).attempt(task, spec, fresh)

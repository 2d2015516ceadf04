"""Routing by task type: how many samples, what is kept, how a sample counts.

- ``eval``: ``n`` samples per task; the run reports pass@k.
- ``train``: ``n`` samples per task form one group (for GRPO-style
  advantages); token ids and logprobs stay in the trajectories.
- ``synth``: nothing grades the task; a clean submission is its success,
  and the trajectories that succeeded are the data set.

A task without a type is identified from its run: a trainer attached means
``train``; something to grade with (reference tests) and no trainer mean
``eval``; nothing to grade with means ``synth``. :meth:`TaskRouter.annotate`
records in each trajectory's ``meta`` the type, whether it was given or
identified (``task_type``, ``task_type_source``) and the sample's group
(``group_id``, :func:`megaflow.core.tasks.group_id`), and drops token-level
data (prompt ids, completion ids, logprobs) from every type but ``train``.
The app's attempt (``megaflow.app.attempt``) calls it for every sample.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from megaflow.core.tasks import TaskSpec, TaskType, group_id
from megaflow.core.trajectory import ModelCall, Trajectory

TEST_KEYS = ("FAIL_TO_PASS", "PASS_TO_PASS", "tests")
TypeSource = Literal["given", "identified"]


def has_reference_tests(payload: dict[str, Any]) -> bool:
    return any(payload.get(k) for k in TEST_KEYS)


def identify_task_type(
    task: TaskSpec, *, trainer_attached: bool = False, graded: bool | None = None
) -> tuple[TaskType, TypeSource]:
    """The task's type and whether it was given or identified from the run.
    ``graded`` says whether the run can grade it; None infers it from the payload."""
    if task.type is not None:
        return task.type, "given"
    if trainer_attached:
        return TaskType.TRAIN, "identified"
    if graded if graded is not None else has_reference_tests(task.payload):
        return TaskType.EVAL, "identified"
    return TaskType.SYNTH, "identified"


class RoutePlan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task_type: TaskType
    source: TypeSource
    samples: int
    keep_token_data: bool
    keep_successful_only: bool


def strip_token_data(traj: Trajectory) -> None:
    """Drop what only training needs: prompt and completion token ids, logprobs."""
    for step in traj.steps:
        if isinstance(step, ModelCall):
            step.prompt_token_ids = None
            step.token_ids = None
            step.logprobs = None


class TaskRouter:
    """Plans a run's samples by type and annotates what each sample keeps."""

    def __init__(self, *, samples: int = 1, trainer_attached: bool = False) -> None:
        self.samples = samples
        self.trainer_attached = trainer_attached

    def plan(self, task: TaskSpec, *, graded: bool | None = None) -> RoutePlan:
        task_type, source = identify_task_type(
            task, trainer_attached=self.trainer_attached, graded=graded
        )
        return RoutePlan(
            task_type=task_type,
            source=source,
            samples=self.samples,
            keep_token_data=task_type is TaskType.TRAIN,
            keep_successful_only=task_type is TaskType.SYNTH,
        )

    def annotate(
        self, task: TaskSpec, trajectory: Trajectory, *, graded: bool | None = None
    ) -> RoutePlan:
        """Record the sample's type and group in its trajectory; drop token data
        unless the type keeps it."""
        plan = self.plan(task, graded=graded)
        trajectory.meta["task_type"] = plan.task_type.value
        trajectory.meta["task_type_source"] = plan.source
        trajectory.meta["group_id"] = group_id(task)
        if not plan.keep_token_data:
            strip_token_data(trajectory)
        return plan

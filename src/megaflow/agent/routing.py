"""Routing by task type: how many samples, what is kept, how results aggregate.

- ``eval``: ``n`` samples per task; the run reports pass@k.
- ``train``: ``n`` samples per task form one group (for GRPO-style
  advantages); token ids and logprobs stay in the trajectories.
- ``synth``: trajectories that succeeded are kept as a data set.

A task without a type is identified from its run: a trainer attached means
``train``; reference tests and no trainer mean ``eval``; nothing to grade
with means ``synth``. The type and whether it was given or identified are
recorded in each trajectory's ``meta`` (``task_type``, ``task_type_source``).
Token-level data is dropped from trajectories of every type but ``train``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from megaflow.agent.metrics import RunMetrics, SampleOutcome, summarize
from megaflow.core.tasks import TaskResult, TaskSpec, TaskType
from megaflow.core.trajectory import ModelCall, Trajectory

TEST_KEYS = ("FAIL_TO_PASS", "PASS_TO_PASS", "tests")


def has_reference_tests(payload: dict[str, Any]) -> bool:
    return any(payload.get(k) for k in TEST_KEYS)


def identify_task_type(
    task: TaskSpec, *, trainer_attached: bool = False, graded: bool | None = None
) -> tuple[TaskType, Literal["given", "identified"]]:
    """The task's type and whether it was given or identified from the run.
    ``graded`` says whether the run can grade; None infers it from the payload."""
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
    source: Literal["given", "identified"]
    samples: int
    keep_token_data: bool
    keep_successful_only: bool


def group_id(task: TaskSpec) -> str:
    """The task a sample belongs to: its id without the sample suffix
    (``<id>:s<n>`` as :func:`expand_samples` makes, or ``<id>/<n>``)."""
    for suffix in (f":s{task.sample}", f"/{task.sample}"):
        if task.id.endswith(suffix) and len(task.id) > len(suffix):
            return task.id[: -len(suffix)]
    return task.id


def expand_samples(task: TaskSpec, plan: RoutePlan) -> list[TaskSpec]:
    """``plan.samples`` copies of a task, ids ``<id>:s<i>``. The type is left as
    given, so an identified type is identified (and recorded so) per sample."""
    if plan.samples == 1:
        return [task]
    return [
        task.model_copy(update={"id": f"{task.id}:s{i}", "sample": i}) for i in range(plan.samples)
    ]


def strip_token_data(traj: Trajectory) -> None:
    for step in traj.steps:
        if isinstance(step, ModelCall):
            step.prompt_token_ids = None
            step.token_ids = None
            step.logprobs = None


class TaskRouter:
    """Plans a run's tasks by type and collects what each type keeps."""

    def __init__(
        self,
        *,
        samples: int = 1,
        trainer_attached: bool = False,
        graded: bool | None = None,
        ks: Sequence[int] = (1,),
    ) -> None:
        self.samples = samples
        self.trainer_attached = trainer_attached
        self.graded = graded
        self.ks = ks
        self.outcomes: list[SampleOutcome] = []
        self.groups: dict[str, list[tuple[Trajectory, float]]] = defaultdict(list)
        self.dataset: list[Trajectory] = []
        self.types: dict[str, TaskType] = {}

    def plan(self, task: TaskSpec) -> RoutePlan:
        task_type, source = identify_task_type(
            task, trainer_attached=self.trainer_attached, graded=self.graded
        )
        return RoutePlan(
            task_type=task_type,
            source=source,
            samples=self.samples,
            keep_token_data=task_type is TaskType.TRAIN,
            keep_successful_only=task_type is TaskType.SYNTH,
        )

    def record(
        self, task: TaskSpec, result: TaskResult, trajectory: Trajectory | None = None
    ) -> RoutePlan:
        """Take one finished sample: annotate its trajectory and file it by type."""
        plan = self.plan(task)
        group = group_id(task)
        self.types[group] = plan.task_type
        success = result.success
        if trajectory is not None:
            trajectory.meta["task_type"] = plan.task_type.value
            trajectory.meta["task_type_source"] = plan.source
            if not plan.keep_token_data:
                strip_token_data(trajectory)
            if plan.task_type is TaskType.SYNTH and result.error_kind is None and not success:
                # Nothing grades a synth task: a clean submission counts as success.
                success = trajectory.meta.get("exit_status") == "submitted"
            if plan.task_type is TaskType.TRAIN:
                self.groups[group].append((trajectory, result.reward))
            elif plan.task_type is TaskType.SYNTH and success:
                self.dataset.append(trajectory)
        self.outcomes.append(
            SampleOutcome(
                task_id=group,
                success=success,
                reward=result.reward,
                steps=len(trajectory.model_calls) if trajectory else 0,
                tokens=trajectory.tokens if trajectory else 0,
                duration_s=(trajectory.ended_at or 0) - trajectory.started_at
                if trajectory and trajectory.ended_at
                else 0.0,
                error_kind=result.error_kind.value if result.error_kind else None,
            )
        )
        return plan

    def metrics(self) -> RunMetrics:
        return summarize(self.outcomes, self.ks)

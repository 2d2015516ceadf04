"""The run config: one YAML file describes a whole run.

Every section is a pydantic model with ``extra="forbid"``; pluggable parts
(runtime, policy, agent, model, stores) are tagged unions by ``type``, whose
members live beside their backends in each service's ``config.py``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from megaflow.agent.config import AgentConfig, BuiltinAgentConfig
from megaflow.core.tasks import TaskType, check_id
from megaflow.datasets.sources import DEFAULT_MAX_SOURCE_MB
from megaflow.environment.config import EnvironmentConfig
from megaflow.grading.config import GraderConfig, SwebenchGraderConfig
from megaflow.model.config import ModelConfig, ReplayModelConfig
from megaflow.scheduler.config import SchedulerConfig
from megaflow.scheduler.fleet_config import FleetConfig, LocalFleetConfig
from megaflow.storage.config import StorageConfig
from megaflow.train.loop_config import TrainingConfig


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SwebenchTasksConfig(_Cfg):
    """SWE-bench-style instances from a directory, a JSON or a JSONL file."""

    type: Literal["swebench"] = "swebench"
    path: str = Field(description="Task set directory, or a .json / .jsonl file.")
    limit: int | None = Field(None, ge=1, description="Use only the first N instances.")
    instances: list[str] | None = Field(None, description="Use only these instance ids.")
    source_roots: list[str] = Field(
        default_factory=list,
        description="Folders besides the task set's own that megaflow_source paths may "
        "point into (symlinks resolved); relative ones are relative to the config file.",
    )
    """Every ``megaflow_source`` path must resolve inside the task set's folder (the
    directory of its instances file) or one of these folders; any other path (``/etc``,
    ``../../..``, a symlink out) is refused before anything is copied."""
    max_source_mb: int = Field(
        DEFAULT_MAX_SOURCE_MB,
        ge=1,
        le=1_048_576,
        description="Largest repository source, in MiB: a directory's file sizes, a "
        "tarball's file and member sizes, a bundle's file size; a larger one is refused.",
    )


class InlineTask(_Cfg):
    id: str
    priority: int = 0
    payload: dict[str, object] = Field(default_factory=dict)


class InlineTasksConfig(_Cfg):
    """Tasks written in the config itself (for small jobs and tests)."""

    type: Literal["inline"] = "inline"
    tasks: list[InlineTask] = Field(min_length=1)

    @field_validator("tasks")
    @classmethod
    def _unique(cls, tasks: list[InlineTask]) -> list[InlineTask]:
        seen: set[str] = set()
        for t in tasks:
            if t.id in seen:
                raise ValueError(f"duplicate task id {t.id!r}")
            seen.add(t.id)
        return tasks


class HarborTasksConfig(_Cfg):
    """Harbor task folders (docs/tasks-format.md), graded by the ``script`` grader."""

    type: Literal["harbor"] = "harbor"
    path: str = Field(
        description="A Harbor task folder, a folder of them, or the JSONL that "
        "`megaflow tasks convert --from harbor` wrote."
    )
    limit: int | None = Field(None, ge=1, description="Use only the first N tasks.")


TasksConfig = Annotated[
    SwebenchTasksConfig | InlineTasksConfig | HarborTasksConfig, Field(discriminator="type")
]


class ControlConfig(_Cfg):
    """A negative-control arm: the same tasks, run by another model (and agent)."""

    model: ModelConfig = Field(
        default_factory=lambda: ReplayModelConfig(play="empty"),
        description="The control's model; by default the replay of empty patches.",
    )
    agent: AgentConfig | None = Field(None, description="The control's agent; the run's if None.")


class ExpectConfig(_Cfg):
    """Checks on the finished job; any that fails makes `megaflow run` exit 1."""

    min_resolved: float | None = Field(
        None, ge=0, le=1, description="Least share of samples the run must resolve."
    )
    max_control_resolved: float | None = Field(
        None, ge=0, le=1, description="Largest share the control arm may resolve."
    )
    max_error_share: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Largest share of an arm's samples that may end in an error (an agent's "
        "own failure, an infrastructure error, a timeout, a cancellation); 1 allows any.",
    )


class RunConfig(_Cfg):
    """A run: which tasks, run by which agent and model, in which environment."""

    name: str = Field("run", description="A name for the run; its id gets a suffix.")
    task_type: TaskType | None = Field(
        None, description="train, eval or synth; identified from the run when absent."
    )
    samples: int = Field(1, ge=1, le=10_000, description="Attempts of each task (n for pass@k).")
    priority: int = Field(0, ge=-1_000_000, le=1_000_000)
    max_attempts: int = Field(3, ge=1, le=100, description="Tries per task on infra errors.")
    deadline_s: float = Field(3600, gt=0, description="Longest time for one task.")
    tasks: TasksConfig | None = Field(
        description="The tasks run; a train run whose train.sets name every task it trains "
        "on may leave it out (its held-out split then names its own path)."
    )
    agent: AgentConfig = Field(default_factory=BuiltinAgentConfig)
    model: ModelConfig = Field(default_factory=ReplayModelConfig)
    environment: EnvironmentConfig = Field(default_factory=EnvironmentConfig)
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    fleet: FleetConfig = Field(
        default_factory=LocalFleetConfig,
        description="Where tasks run: this machine, or the node agents of a Ray cluster.",
    )
    storage: StorageConfig = Field(default_factory=StorageConfig)
    control: ControlConfig | None = Field(None, description="An optional negative control.")
    expect: ExpectConfig = Field(default_factory=ExpectConfig)
    grading: GraderConfig = Field(
        default_factory=SwebenchGraderConfig,
        description="How the tasks are graded (grading.type); a Harbor task set defaults "
        "to the script grader, any other to swebench.",
    )
    train: TrainingConfig | None = Field(
        None, description="The closed RL loop of `megaflow train` (docs/train-loop.md)."
    )

    @model_validator(mode="before")
    @classmethod
    def _tasks_from_sets(cls, data: object) -> object:
        """``tasks`` may be left out when ``train.sets`` gives the tasks trained on; else
        it stays required (an explicit null too), so its absence is reported as ``tasks``."""
        if not isinstance(data, dict) or data.get("tasks") is not None:
            return data
        train = data.get("train")
        rest = {k: v for k, v in data.items() if k != "tasks"}
        if isinstance(train, dict) and train.get("sets") is not None:
            return {**rest, "tasks": None}
        return rest

    @model_validator(mode="before")
    @classmethod
    def _harbor_grading(cls, data: object) -> object:
        """A Harbor task set is graded by its tests unless the config says otherwise."""
        if isinstance(data, dict) and "grading" not in data:
            tasks = data.get("tasks")
            if isinstance(tasks, dict) and tasks.get("type") == "harbor":
                return {**data, "grading": {"type": "script"}}
        return data

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return check_id(v, "run name")

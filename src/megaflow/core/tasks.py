"""Domain types for runs, tasks, attempts and results.

These are the wire types every layer shares: the scheduler queues
:class:`TaskSpec`, stores keep :class:`TaskRecord`, executors return
:class:`TaskResult`. All are pydantic models with ``extra="forbid"`` so a
malformed task fails loudly at the edge instead of deep inside a run.
"""

from __future__ import annotations

import asyncio
import re
import time
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from megaflow.core.errors import AgentError, Cancelled, InfraError, InstanceLost, ModelError
from megaflow.core.states import TaskState

_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@/+-]{0,199}$")


def check_id(value: str, what: str = "id") -> str:
    """Ids are 1-200 printable ASCII characters, starting with a letter or digit."""
    if not _ID_RE.match(value) or ".." in value:
        raise ValueError(
            f"invalid {what} {value[:60]!r}: use 1-200 characters from "
            "letters, digits and ._:@/+- , starting with a letter or digit, without '..'"
        )
    return value


class Model(BaseModel):
    """Base of every MegaFlow domain type: strict about unknown fields."""

    model_config = ConfigDict(extra="forbid", frozen=False, validate_assignment=False)


class TaskType(StrEnum):
    TRAIN = "train"
    EVAL = "eval"
    SYNTH = "synth"


class ExecutionMode(StrEnum):
    EPHEMERAL = "ephemeral"
    PERSISTENT = "persistent"


class ErrorKind(StrEnum):
    INFRA = "infra"
    AGENT = "agent"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    INFRA_LOST = "infra_lost"
    """An attempt lost with its control plane or instance (recorded on resume)."""
    TAMPERED = "tampered"
    """Graded, with reward 0: the patched code reached into the test runner or its results."""


class Outcome(StrEnum):
    """How one attempt of a task ended, as the scheduler acts on it."""

    OK = "ok"
    INFRA = "infra"
    """An infrastructure failure: retried with backoff up to ``max_attempts``."""
    LOST = "lost"
    """The attempt's instance was lost: retried like ``INFRA``."""
    AGENT = "agent"
    """The agent or its model failed: final."""
    TIMEOUT = "timeout"
    CANCEL = "cancel"
    PREEMPT = "preempt"
    """Preempted for a more urgent task: queued again, not a failed attempt."""
    ERROR = "error"
    """The executor raised something MegaFlow does not classify: final."""

    @property
    def retried(self) -> bool:
        return self in (Outcome.INFRA, Outcome.LOST)

    @property
    def error_kind(self) -> ErrorKind | None:
        """The kind recorded with the attempt; ``None`` for no error or an unknown one."""
        return _KIND_OF.get(self)


_KIND_OF = {
    Outcome.INFRA: ErrorKind.INFRA,
    Outcome.LOST: ErrorKind.INFRA,
    Outcome.AGENT: ErrorKind.AGENT,
    Outcome.TIMEOUT: ErrorKind.TIMEOUT,
    Outcome.CANCEL: ErrorKind.CANCELLED,
}


def classify(exc: BaseException) -> Outcome:
    """What a failure means for its task: the one place exceptions are classified.

    Both the scheduler (an attempt's outcome) and the agent layer
    (:func:`megaflow.agent.abstract.error_kind`) go through it.
    """
    if isinstance(exc, InstanceLost):
        return Outcome.LOST
    if isinstance(exc, InfraError):
        return Outcome.INFRA
    if isinstance(exc, AgentError | ModelError):  # a model's error answer is final too
        return Outcome.AGENT
    if isinstance(exc, TimeoutError):  # MegaFlowTimeout and asyncio's deadlines
        return Outcome.TIMEOUT
    if isinstance(exc, Cancelled | asyncio.CancelledError):
        return Outcome.CANCEL
    return Outcome.ERROR


class Resources(Model):
    """What one task needs from an instance."""

    cpu: float = Field(1.0, gt=0, le=1024, description="CPU cores.")
    memory_mb: int = Field(1024, gt=0, le=16 * 1024 * 1024, description="Memory in MiB.")
    gpu: int = Field(0, ge=0, le=64, description="Whole GPUs.")


class Timeouts(Model):
    """Seconds allowed at each stage; ``None`` means no limit for that stage."""

    queue_s: float | None = Field(None, gt=0, description="Longest wait in the queue.")
    start_s: float | None = Field(300.0, gt=0, description="Longest sandbox start.")
    deadline_s: float | None = Field(3600.0, gt=0, description="Longest run, start to graded.")


class TaskSpec(Model):
    """One unit of work: an agent acting in an environment, graded at the end."""

    id: str
    run_id: str
    type: TaskType | None = Field(
        None, description="train, eval or synth; None lets the run identify it."
    )
    priority: int = Field(0, ge=-1_000_000, le=1_000_000, description="Higher runs first.")
    resources: Resources = Field(default_factory=Resources)
    timeouts: Timeouts = Field(default_factory=Timeouts)
    max_attempts: int = Field(3, ge=1, le=100, description="Attempts, counting the first.")
    mode: ExecutionMode = ExecutionMode.EPHEMERAL
    environment: str = Field("default", description="Name of an environment in the run config.")
    agent: str = Field("default", description="Name of an agent in the run config.")
    model: str = Field("default", description="Name of a model in the run config.")
    tenant: str = Field("default", description="Owner, for fair sharing.")
    sample: int = Field(0, ge=0, description="Sample index when a task is run n times.")
    payload: dict[str, Any] = Field(default_factory=dict, description="Task data for the agent.")

    @field_validator("id", "run_id")
    @classmethod
    def _valid_id(cls, v: str) -> str:
        return check_id(v)


def sample_id(run_id: str, task: str, sample: int) -> str:
    """The id of one sample of a task in a run: ``<run>/<task>/<n>``, the only scheme."""
    return f"{run_id}/{task}/{sample}"


def group_id(task: TaskSpec) -> str:
    """What the samples of one task share: the id less its ``/<n>`` (``<run>/<task>``).
    A task whose id does not end in its sample number is a group of its own."""
    suffix = f"/{task.sample}"
    if task.id.endswith(suffix) and len(task.id) > len(suffix):
        return task.id[: -len(suffix)]
    return task.id


def artifact_prefix(task: TaskSpec, attempt: int) -> str:
    """Where attempt ``attempt`` of ``task`` keeps its artifacts (trajectory, patch, grade)
    in the artifact store: every attempt its own, so a retried task keeps each try's."""
    return f"runs/{task.run_id}/tasks/{task.id.replace(':', '_')}/attempt-{attempt}"


class RunSpec(Model):
    """A run: a named batch of tasks sharing one config."""

    id: str
    name: str = ""
    config: dict[str, Any] = Field(default_factory=dict, description="The validated run config.")
    created_at: float = Field(default_factory=time.time)
    labels: dict[str, str] = Field(default_factory=dict)

    @field_validator("id")
    @classmethod
    def _valid_id(cls, v: str) -> str:
        return check_id(v, "run id")


class Attempt(Model):
    """One try at a task. A task has one or more attempts."""

    task_id: str
    number: int = Field(ge=1)
    instance: str | None = None
    sandbox: str | None = None
    started_at: float = Field(default_factory=time.time)
    ended_at: float | None = None
    error_kind: ErrorKind | None = None
    error: str | None = None


class TaskResult(Model):
    """What a finished task produced."""

    task_id: str
    success: bool = False
    reward: float = 0.0
    metrics: dict[str, float] = Field(default_factory=dict)
    artifacts: dict[str, str] = Field(
        default_factory=dict, description="Artifact references, name -> store key."
    )
    error_kind: ErrorKind | None = None
    error: str | None = None
    finished_at: float = Field(default_factory=time.time)


class TaskRecord(Model):
    """A task as the metadata store keeps it: its spec and where it stands."""

    spec: TaskSpec
    state: TaskState = TaskState.QUEUED
    attempts: int = Field(0, ge=0, description="Attempts started so far.")
    preemptions: int = Field(0, ge=0)
    seq: int = Field(0, ge=0, description="Arrival order, assigned by the store.")
    updated_at: float = Field(default_factory=time.time)
    error: str | None = None

    @property
    def id(self) -> str:
        return self.spec.id


TaskTypeName = Literal["train", "eval", "synth"]

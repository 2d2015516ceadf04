"""Events: every state change in the house is published as one of these.

The dispatcher reacts to events instead of polling. Events are pydantic
models tagged by ``kind`` so that they cross process boundaries (Redis,
gRPC) as JSON and come back as the same type via :func:`parse_event`.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from megaflow.core.states import TaskState
from megaflow.core.tasks import ErrorKind, Model


class _Event(Model):
    ts: float = Field(default_factory=time.time)


class TaskSubmitted(_Event):
    kind: Literal["task_submitted"] = "task_submitted"
    run_id: str
    task_ids: list[str]


class TaskScheduled(_Event):
    kind: Literal["task_scheduled"] = "task_scheduled"
    run_id: str
    task_id: str
    instance: str | None = None


class TaskStarted(_Event):
    kind: Literal["task_started"] = "task_started"
    run_id: str
    task_id: str
    attempt: int
    sandbox: str | None = None


class TaskFinished(_Event):
    kind: Literal["task_finished"] = "task_finished"
    run_id: str
    task_id: str
    state: TaskState
    success: bool = False
    reward: float = 0.0


class TaskFailed(_Event):
    kind: Literal["task_failed"] = "task_failed"
    run_id: str
    task_id: str
    error_kind: ErrorKind
    error: str = ""
    will_retry: bool = False


class TaskPreempted(_Event):
    kind: Literal["task_preempted"] = "task_preempted"
    run_id: str
    task_id: str
    by_task_id: str | None = None


class TaskCancelled(_Event):
    kind: Literal["task_cancelled"] = "task_cancelled"
    run_id: str
    task_id: str | None = None
    """None cancels the whole run."""


class CapacityFreed(_Event):
    kind: Literal["capacity_freed"] = "capacity_freed"
    instance: str


class InstanceJoined(_Event):
    kind: Literal["instance_joined"] = "instance_joined"
    instance: str
    region: str = "default"
    capacity: dict[str, float] = Field(default_factory=dict)


class InstanceHeartbeat(_Event):
    kind: Literal["instance_heartbeat"] = "instance_heartbeat"
    instance: str


class InstanceLost(_Event):
    kind: Literal["instance_lost"] = "instance_lost"
    instance: str
    reason: str = ""


Event = Annotated[
    TaskSubmitted
    | TaskScheduled
    | TaskStarted
    | TaskFinished
    | TaskFailed
    | TaskPreempted
    | TaskCancelled
    | CapacityFreed
    | InstanceJoined
    | InstanceHeartbeat
    | InstanceLost,
    Field(discriminator="kind"),
]

_ADAPTER: TypeAdapter[Any] = TypeAdapter(Event)


def parse_event(data: bytes | str | dict[str, Any]) -> Event:
    """Rebuild an event from its JSON (bytes or str) or dict form."""
    if isinstance(data, dict):
        return _ADAPTER.validate_python(data)  # type: ignore[no-any-return]
    return _ADAPTER.validate_json(data)  # type: ignore[no-any-return]

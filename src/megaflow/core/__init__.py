"""Domain types shared by every layer. Depends on nothing else in MegaFlow."""

from megaflow.core.events import Event, parse_event
from megaflow.core.states import TERMINAL_STATES, TaskState, can_transition, check_transition
from megaflow.core.tasks import (
    Attempt,
    ErrorKind,
    ExecutionMode,
    Resources,
    RunSpec,
    TaskRecord,
    TaskResult,
    TaskSpec,
    TaskType,
    Timeouts,
)
from megaflow.core.trajectory import Action, ModelCall, Observation, Trajectory

__all__ = [
    "TERMINAL_STATES",
    "Action",
    "Attempt",
    "ErrorKind",
    "Event",
    "ExecutionMode",
    "ModelCall",
    "Observation",
    "Resources",
    "RunSpec",
    "TaskRecord",
    "TaskResult",
    "TaskSpec",
    "TaskState",
    "TaskType",
    "Timeouts",
    "Trajectory",
    "can_transition",
    "check_transition",
    "parse_event",
]

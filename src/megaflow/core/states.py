"""The task state machine.

A task moves ``QUEUED -> SCHEDULED -> STARTING -> RUNNING -> GRADING`` and ends
in one of the terminal states. ``PREEMPTED`` and ``RETRYING`` lead back to
``QUEUED``. Every change goes through :func:`check_transition`, so an illegal
move raises :class:`~megaflow.core.errors.InvalidTransition` wherever it is tried.

``SUCCEEDED`` means the task ran to the end and was graded; whether the agent
solved it is ``TaskResult.success``. ``FAILED`` means it could not finish
(the error kind says why).
"""

from __future__ import annotations

from enum import StrEnum

from megaflow.core.errors import InvalidTransition


class TaskState(StrEnum):
    QUEUED = "queued"
    SCHEDULED = "scheduled"
    STARTING = "starting"
    RUNNING = "running"
    GRADING = "grading"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"
    PREEMPTED = "preempted"
    RETRYING = "retrying"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATES

    @property
    def active(self) -> bool:
        """Holds (or is about to hold) a sandbox and a slot on an instance."""
        return self in ACTIVE_STATES


TERMINAL_STATES: frozenset[TaskState] = frozenset(
    {TaskState.SUCCEEDED, TaskState.FAILED, TaskState.TIMED_OUT, TaskState.CANCELLED}
)
ACTIVE_STATES: frozenset[TaskState] = frozenset(
    {TaskState.SCHEDULED, TaskState.STARTING, TaskState.RUNNING, TaskState.GRADING}
)

_S = TaskState
# Every interrupted stage may be preempted, retried (infra error), cancelled or
# time out; only RUNNING and GRADING may fail for the agent's own reasons.
_INTERRUPTS = {_S.PREEMPTED, _S.RETRYING, _S.CANCELLED, _S.TIMED_OUT, _S.FAILED}

TRANSITIONS: dict[TaskState, frozenset[TaskState]] = {
    _S.QUEUED: frozenset({_S.SCHEDULED, _S.CANCELLED, _S.TIMED_OUT, _S.FAILED}),
    _S.SCHEDULED: frozenset({_S.STARTING} | _INTERRUPTS),
    _S.STARTING: frozenset({_S.RUNNING} | _INTERRUPTS),
    _S.RUNNING: frozenset({_S.GRADING} | _INTERRUPTS),
    _S.GRADING: frozenset({_S.SUCCEEDED} | _INTERRUPTS),
    _S.PREEMPTED: frozenset({_S.QUEUED, _S.CANCELLED}),
    _S.RETRYING: frozenset({_S.QUEUED, _S.CANCELLED, _S.FAILED}),
    _S.SUCCEEDED: frozenset(),
    _S.FAILED: frozenset(),
    _S.TIMED_OUT: frozenset(),
    _S.CANCELLED: frozenset(),
}


def can_transition(src: TaskState, dst: TaskState) -> bool:
    return dst in TRANSITIONS[src]


def check_transition(src: TaskState, dst: TaskState, task_id: str = "?") -> None:
    """Raise :class:`InvalidTransition` unless ``src -> dst`` is a legal move."""
    if dst not in TRANSITIONS[src]:
        allowed = ", ".join(sorted(s.value for s in TRANSITIONS[src])) or "none (terminal)"
        raise InvalidTransition(
            f"task {task_id}: illegal transition {src.value} -> {dst.value}; "
            f"allowed from {src.value}: {allowed}"
        )

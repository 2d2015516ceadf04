"""Validate a batch of transitions and fold it into one change per task.

Networked metadata stores read the current state of every task a batch
touches, check the whole batch here (state machine, ``expect`` guards,
unknown ids) before writing anything, and then write one row or document
per task: its final state and how many attempts and preemptions the batch
added. Applying the folded change is the same as applying the transitions
one by one, in order, and costs one write per task instead of one per
transition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from megaflow.core.errors import InvalidTransition, NotFound
from megaflow.core.states import TRANSITIONS, TaskState, check_transition
from megaflow.storage.abstract import Transition


@dataclass(slots=True)
class TaskChange:
    """The net effect of a batch on one task."""

    task_id: str
    src: TaskState
    dst: TaskState
    attempts: int = 0
    preemptions: int = 0
    error: str | None = None
    """The last non-``None`` error of the batch; ``None`` keeps the stored one."""


def plan_transitions(
    transitions: Sequence[Transition], current: Mapping[str, TaskState]
) -> list[TaskChange]:
    """Check ``transitions`` against ``current`` states, in order; fold them per task.

    Raises ``NotFound`` for an unknown task and ``InvalidTransition`` for an
    illegal move or a failed ``expect``; nothing is to be written then.
    Changes come back in the order their tasks first appear in the batch.
    """
    changes: dict[str, TaskChange] = {}
    scheduled, preempted = TaskState.SCHEDULED, TaskState.PREEMPTED
    for task_id, dst, expect, error in transitions:
        change = changes.get(task_id)
        if change is None:
            if task_id not in current:
                raise NotFound(f"task {task_id!r} not found")
            src = current[task_id]
            change = changes[task_id] = TaskChange(task_id, src, src)
        if expect is not None and change.dst != expect:
            raise InvalidTransition(
                f"task {task_id}: expected state {expect.value}, found {change.dst.value}"
            )
        if dst not in TRANSITIONS[change.dst]:
            check_transition(change.dst, dst, task_id)  # raises, with the allowed moves
        change.dst = dst
        if dst is scheduled:
            change.attempts += 1
        elif dst is preempted:
            change.preemptions += 1
        if error is not None:
            change.error = error
    return list(changes.values())

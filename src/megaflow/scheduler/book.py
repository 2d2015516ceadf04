"""The scheduler's in-memory view of its tasks: states, runs, attempt counters.

:class:`TaskBook` is the one piece of state that the dispatcher
(:class:`~megaflow.scheduler.service.Scheduler`) and the attempt runner
(:class:`~megaflow.scheduler.attempts.AttemptRunner`) share. It answers
progress queries and :meth:`Scheduler.wait` without a store round trip, and
:meth:`TaskBook.set_state` is the only way a task's state changes: each
change is also handed to the :class:`StateWriter`, which checks and records
it in the metadata store.

State counts per run are plain dicts holding every state (a ``Counter``
item update costs about twice a dict's, ten per no-op task), and a
:class:`~megaflow.storage.abstract.Transition` is built as the tuple it is,
without the named tuple's Python-level ``__new__``.
"""

from __future__ import annotations

import asyncio

from megaflow.core.states import ACTIVE_STATES, TERMINAL_STATES, TaskState
from megaflow.core.tasks import TaskSpec
from megaflow.scheduler.abstract import STAGES
from megaflow.scheduler.writer import StateWriter
from megaflow.storage.abstract import Transition

_STAGE_AT = {s: i for i, s in enumerate(STAGES)}
_tuple_new = tuple.__new__


class TaskBook:
    def __init__(self, writer: StateWriter) -> None:
        self.writer = writer
        self.state: dict[str, TaskState] = {}
        self.run_of: dict[str, str] = {}
        self.tasks_of: dict[str, list[str]] = {}
        self.by_run_state: dict[str, dict[TaskState, int]] = {}
        """Tasks of each run by state, every state present (0 when none)."""
        self.open: dict[str, int] = {}
        """Tasks of each run not terminal yet."""
        self.done_events: dict[str, asyncio.Event] = {}
        self.attempts: dict[str, int] = {}
        """Attempts started per task."""
        self.failures: dict[str, int] = {}
        """Infra failures per task (what ``max_attempts`` counts)."""

    def track(self, spec: TaskSpec, state: TaskState) -> None:
        if spec.id in self.state:
            return
        run = spec.run_id
        self.state[spec.id] = state
        self.run_of[spec.id] = run
        self.tasks_of.setdefault(run, []).append(spec.id)
        counts = self.by_run_state.get(run)
        if counts is None:
            counts = self.by_run_state[run] = dict.fromkeys(TaskState, 0)
        counts[state] += 1
        if state not in TERMINAL_STATES:
            self.open[run] = self.open.get(run, 0) + 1
        self.attempts.setdefault(spec.id, 0)
        self.failures.setdefault(spec.id, 0)

    def set_state(self, task_id: str, dst: TaskState, error: str | None = None) -> None:
        state = self.state
        src = state[task_id]
        run = self.run_of[task_id]
        state[task_id] = dst
        counts = self.by_run_state[run]
        counts[src] -= 1
        counts[dst] += 1
        self.writer.transition(_tuple_new(Transition, (task_id, dst, None, error)))
        if dst in TERMINAL_STATES:
            left = self.open[run] = self.open[run] - 1
            if left == 0:
                ev = self.done_events.get(run)
                if ev is not None:
                    ev.set()

    def advance(self, task_id: str, stage: TaskState) -> int | None:
        """Move an active task on to ``stage`` (STARTING, RUNNING or GRADING),
        through any stage it skipped. Returns the index in ``STAGES`` it was at
        (-1 before STARTING), or None if nothing changed: the task is no longer
        active (interrupted meanwhile) or already at or past ``stage``."""
        cur = self.state[task_id]
        if cur not in ACTIVE_STATES:
            return None
        at = _STAGE_AT.get(cur, -1)
        target = _STAGE_AT[stage]
        if target <= at:
            return None
        if target == at + 1:  # the usual case: the next stage, no slice to walk
            self.set_state(task_id, stage)
            return at
        for s in STAGES[at + 1 : target + 1]:
            self.set_state(task_id, s)
        return at

    def counts(self, run_id: str | None = None) -> dict[TaskState, int]:
        runs = [run_id] if run_id is not None else list(self.by_run_state)
        total: dict[TaskState, int] = {}
        for r in runs:
            for s, n in self.by_run_state.get(r, {}).items():
                if n > 0:
                    total[s] = total.get(s, 0) + n
        return total

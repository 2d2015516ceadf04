"""The scheduler's in-memory view of its tasks: states, runs, attempt counters.

:class:`TaskBook` is the one piece of state that the dispatcher
(:class:`~megaflow.scheduler.service.Scheduler`) and the attempt runner
(:class:`~megaflow.scheduler.attempts.AttemptRunner`) share. It answers
progress queries and :meth:`Scheduler.wait` without a store round trip, and
:meth:`TaskBook.set_state` is the only way a task's state changes: each
change is also handed to the :class:`StateWriter`, which checks and records
it in the metadata store.
"""

from __future__ import annotations

import asyncio
from collections import Counter

from megaflow.core.states import TERMINAL_STATES, TaskState
from megaflow.core.tasks import TaskSpec
from megaflow.scheduler.writer import StateWriter
from megaflow.storage.abstract import Transition


class TaskBook:
    def __init__(self, writer: StateWriter) -> None:
        self.writer = writer
        self.state: dict[str, TaskState] = {}
        self.run_of: dict[str, str] = {}
        self.tasks_of: dict[str, list[str]] = {}
        self.by_run_state: dict[str, Counter[TaskState]] = {}
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
            counts = self.by_run_state[run] = Counter()
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
        self.writer.transition(Transition(task_id, dst, None, error))
        if dst in TERMINAL_STATES:
            left = self.open[run] = self.open[run] - 1
            if left == 0:
                ev = self.done_events.get(run)
                if ev is not None:
                    ev.set()

    def counts(self, run_id: str | None = None) -> dict[TaskState, int]:
        runs = [run_id] if run_id is not None else list(self.by_run_state)
        total: Counter[TaskState] = Counter()
        for r in runs:
            total.update(self.by_run_state.get(r, Counter()))
        return {s: n for s, n in total.items() if n > 0}

"""What the end of an attempt makes of its task.

:class:`Outcomes` records an ended attempt and moves its task on, by the
attempt's :class:`~megaflow.core.tasks.Outcome` (classified from the
executor's exception by :func:`~megaflow.core.tasks.classify`):

==========================  ===========================================
executor outcome            task state
==========================  ===========================================
returns a ``TaskResult``    SUCCEEDED (skipped stages filled in)
``InfraError``, lost        RETRYING -> QUEUED after backoff, or FAILED
instance                    once ``max_attempts`` infra failures are spent
``AgentError``,             FAILED (final)
``ModelError``
``TimeoutError`` / start    TIMED_OUT (final)
or task deadline passed
cancelled by a user         CANCELLED (the executor gets CancelledError)
preempted                   PREEMPTED -> QUEUED (not a failed attempt)
==========================  ===========================================

:meth:`Outcomes.finish` is the one way a task ends: its result, its terminal
state and ``TaskFinished`` go to the writer in that order. The retry timers
live in ``timers`` (by task id), which the attempt runner shares.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable

from prometheus_client import Counter, Histogram

from megaflow.core.events import TaskFailed, TaskFinished, TaskPreempted
from megaflow.core.states import TaskState
from megaflow.core.tasks import Attempt, ErrorKind, Outcome, TaskResult, TaskSpec
from megaflow.monitoring.scheduler import SchedulerMetrics
from megaflow.scheduler.abstract import PendingTask
from megaflow.scheduler.book import TaskBook
from megaflow.scheduler.config import RetryConfig
from megaflow.scheduler.dispatch import DispatchCore
from megaflow.scheduler.fleet import Instance
from megaflow.scheduler.records import trusted
from megaflow.scheduler.writer import StateWriter

_KIND = {o: o.error_kind for o in Outcome}  # a dict lookup, not an enum property, per attempt
_FINAL = {
    Outcome.AGENT: TaskState.FAILED,
    Outcome.TIMEOUT: TaskState.TIMED_OUT,
    Outcome.CANCEL: TaskState.CANCELLED,
    Outcome.ERROR: TaskState.FAILED,
}


_FINISHED_KIND: str = TaskFinished.model_fields["kind"].default


def _finished(
    ts: float, run_id: str, task_id: str, state: TaskState, success: bool, reward: float
) -> TaskFinished:
    return trusted(
        TaskFinished, ts=ts, run_id=run_id, task_id=task_id, state=state, success=success,
        reward=reward,
    )  # fmt: skip


def backoff(retry: RetryConfig, rng: random.Random, failures: int) -> float:
    """Exponential backoff with jitter before retry number ``failures``."""
    delay = min(retry.max_s, retry.base_s * 2.0 ** (failures - 1))
    return delay * (1 - retry.jitter * rng.random())


class Outcomes:
    def __init__(
        self,
        *,
        book: TaskBook,
        core: DispatchCore,
        writer: StateWriter,
        loop: asyncio.AbstractEventLoop,
        kick: Callable[[], None],
        backoff: Callable[[int], float],
        timers: dict[str, asyncio.TimerHandle],
        metrics: SchedulerMetrics | None = None,
    ) -> None:
        self.book = book
        self.core = core
        self.writer = writer
        self.loop = loop
        self.kick = kick
        self.backoff = backoff
        self.timers = timers
        self.metrics = metrics
        self._durations: dict[Outcome, Histogram] = {}
        self._errors: dict[ErrorKind, Counter] = {}

    def finish(self, spec: TaskSpec, dst: TaskState, result: TaskResult) -> None:
        self.writer.result(result)
        self.book.set_state(spec.id, dst, result.error)
        self.writer.announce(
            _FINISHED_KIND, _finished, time.time(), spec.run_id, spec.id, dst,
            result.success, result.reward,
        )  # fmt: skip

    def conclude(
        self,
        task: PendingTask,
        inst: Instance,
        n: int,
        started: float,
        outcome: Outcome,
        message: str,
        result: TaskResult | None,
    ) -> None:
        """Record attempt ``n`` of ``task`` on ``inst`` and move the task on."""
        spec = task.spec
        tid = spec.id
        now = time.time()
        kind = _KIND.get(outcome)
        self.writer.attempt(
            trusted(
                Attempt,
                task_id=tid,
                number=n,
                instance=inst.id,
                started_at=started,
                ended_at=now,
                error_kind=kind,
                error=message or None,
            )
        )
        if self.metrics is not None:
            self._observe(outcome, kind, now - started)
        book = self.book
        if outcome is Outcome.OK:
            assert result is not None
            book.advance(tid, TaskState.GRADING)
            if result.task_id != tid:
                result.task_id = tid
            self.finish(spec, TaskState.SUCCEEDED, result)
        elif outcome is Outcome.PREEMPT:
            book.set_state(tid, TaskState.PREEMPTED, message)
            book.set_state(tid, TaskState.QUEUED)
            self.core.enqueue(task)
            self.writer.event(TaskPreempted(run_id=spec.run_id, task_id=tid))
        elif outcome is Outcome.INFRA or outcome is Outcome.LOST:
            failures = book.failures[tid] = book.failures.get(tid, 0) + 1
            retry = failures < spec.max_attempts
            fail = TaskFailed(
                run_id=spec.run_id,
                task_id=tid,
                error_kind=ErrorKind.INFRA,
                error=message,
                will_retry=retry,
            )
            self.writer.event(fail)
            if retry:
                book.set_state(tid, TaskState.RETRYING, message)
                delay = self.backoff(failures)
                self.timers[tid] = self.loop.call_later(delay, self._requeue, task)
            else:
                res = TaskResult(task_id=tid, error_kind=ErrorKind.INFRA, error=message)
                self.finish(spec, TaskState.FAILED, res)
        else:
            res = TaskResult(task_id=tid, error_kind=kind, error=message)
            self.finish(spec, _FINAL[outcome], res)

    def _observe(self, outcome: Outcome, kind: ErrorKind | None, seconds: float) -> None:
        # The labelled children are looked up once each: ``labels()`` takes a
        # lock and builds a key on every call.
        m = self.metrics
        assert m is not None
        child = self._durations.get(outcome)
        if child is None:
            child = self._durations[outcome] = m.duration.labels(outcome=outcome.value)
        child.observe(seconds)
        if kind is not None:
            err = self._errors.get(kind)
            if err is None:
                err = self._errors[kind] = m.errors.labels(kind=kind.value)
            err.inc()

    def _requeue(self, task: PendingTask) -> None:
        self.timers.pop(task.id, None)
        if self.book.state.get(task.id) is not TaskState.RETRYING:
            return
        self.book.set_state(task.id, TaskState.QUEUED)
        self.core.enqueue(task)
        self.kick()

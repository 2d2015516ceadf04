"""Running attempts: stages, timeouts, interruption, cancellation.

:class:`AttemptRunner` owns what happens to a task once the dispatcher has
placed it, until its attempt ends; :class:`~megaflow.scheduler.outcomes.Outcomes`
then decides what the task becomes. The runner gets its collaborators
explicitly: the dispatch core (to release a slot or queue a task again), the
:class:`TaskBook` of task states it shares with the dispatcher, the
:class:`StateWriter`, the event loop, a clock, a ``kick`` callback that wakes
the dispatcher, the backoff function and optional metrics.

Cancellation, preemption, instance loss and the start timeout all reach the
executor as ``asyncio.CancelledError``; the reason recorded before the
cancel decides the outcome, also when the executor ends with another error
after it (a sandbox lost with the deadline is the deadline's, not infra).
The start timeout and the task deadline of every attempt share two
:class:`~megaflow.scheduler.deadlines.Deadlines` timers.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any

from megaflow.core.states import TaskState
from megaflow.core.tasks import ErrorKind, Outcome, TaskResult, TaskSpec, classify
from megaflow.monitoring.scheduler import SchedulerMetrics
from megaflow.scheduler.abstract import PendingTask, TaskContext, TaskExecutor
from megaflow.scheduler.book import TaskBook
from megaflow.scheduler.deadlines import Deadlines
from megaflow.scheduler.dispatch import DispatchCore
from megaflow.scheduler.fleet import Instance
from megaflow.scheduler.outcomes import Outcomes
from megaflow.scheduler.writer import StateWriter
from megaflow.storage.abstract import MetadataStore


class AttemptRunner:
    def __init__(
        self,
        *,
        executor: TaskExecutor,
        book: TaskBook,
        core: DispatchCore,
        writer: StateWriter,
        metadata: MetadataStore,
        loop: asyncio.AbstractEventLoop,
        clock: Callable[[], float],
        kick: Callable[[], None],
        backoff: Callable[[int], float],
        metrics: SchedulerMetrics | None = None,
    ) -> None:
        self.executor = executor
        self.book = book
        self.core = core
        self.writer = writer
        self.metadata = metadata
        self.loop = loop
        self.clock = clock
        self.kick = kick
        self.backoff = backoff
        self.metrics = metrics
        self.running_tasks: dict[str, asyncio.Task[None]] = {}
        self.reasons: dict[str, tuple[Outcome, str]] = {}
        self.timers: dict[str, asyncio.TimerHandle] = {}
        self._start_timeouts = Deadlines(loop, self._start_too_long)
        self._deadlines = Deadlines(loop, self._deadline_passed)
        self._placed: dict[str, tuple[PendingTask, Instance, int]] = {}
        """Attempts created but not yet entered: cancelling those skips their body."""
        self._spawned: set[asyncio.Task[Any]] = set()
        self.outcomes = Outcomes(
            book=book, core=core, writer=writer, loop=loop, kick=kick,
            backoff=backoff, timers=self.timers, metrics=metrics,
        )  # fmt: skip

    # -- bookkeeping -------------------------------------------------------------
    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = self.loop.create_task(coro)
        self._spawned.add(task)
        task.add_done_callback(self._spawned.discard)

    # -- starting --------------------------------------------------------------------
    def start_attempt(self, task: PendingTask, inst: Instance) -> None:
        tid = task.id
        timer = self.timers.pop(tid, None)
        if timer is not None:
            timer.cancel()
        book = self.book
        n = book.attempts[tid] = book.attempts.get(tid, 0) + 1
        book.set_state(tid, TaskState.SCHEDULED)
        self._placed[tid] = (task, inst, n)
        self.running_tasks[tid] = self.loop.create_task(self._attempt(task, inst, n))

    def _report(self, spec: TaskSpec, stage: TaskState) -> None:
        at = self.book.advance(spec.id, stage)
        if at is None:
            return  # interrupted meanwhile, or a stage already passed
        if stage is TaskState.STARTING:
            if spec.timeouts.start_s is not None:
                self._start_timeouts.add(spec.id, spec.timeouts.start_s)
        elif at < 1:  # only STARTING arms the start timeout
            self._start_timeouts.discard(spec.id)

    def _start_too_long(self, task_id: str, seconds: float) -> None:
        self.interrupt(task_id, Outcome.TIMEOUT, f"sandbox start took longer than {seconds}s")

    def _deadline_passed(self, task_id: str, seconds: float) -> None:
        if task_id not in self.reasons:  # an earlier interruption decides the outcome
            self.interrupt(task_id, Outcome.TIMEOUT, f"task deadline of {seconds}s passed")

    async def _attempt(self, task: PendingTask, inst: Instance, n: int) -> None:
        spec = task.spec
        tid = spec.id
        self._placed.pop(tid, None)
        started = time.time()
        ctx = TaskContext(spec, n, inst.id, inst.spec.region, partial(self._report, spec))
        deadline = spec.timeouts.deadline_s
        result: TaskResult | None = None
        outcome, message = Outcome.OK, ""
        stopping = False
        if deadline:
            self._deadlines.add(tid, deadline)
        try:
            result = await self.executor.run(ctx)
        except asyncio.CancelledError:
            self.running_tasks.pop(tid, None)
            reason = self.reasons.pop(tid, None)
            if reason is None:
                stopping = True
                raise  # the scheduler is stopping: the task stays in flight for resume
            outcome, message = reason
        except Exception as exc:
            outcome, message = classify(exc), str(exc)
            reason = self.reasons.pop(tid, None)
            if reason is not None:
                # Interrupted (the deadline passed, a cancel, a preemption) before this
                # failure was seen: the failure is the interruption's doing or came with
                # it (the sandbox torn down meanwhile, a cancel overtaken by a reply in
                # the same loop turn), so the interruption decides, as for a cancel.
                outcome, message = reason
            elif outcome is Outcome.TIMEOUT and not message:
                message = f"task deadline of {deadline}s passed"
            elif outcome is Outcome.ERROR:
                message = f"executor raised {type(exc).__name__}: {exc}"
        finally:
            self.running_tasks.pop(tid, None)
            self._start_timeouts.discard(tid)
            self._deadlines.discard(tid)
            self.core.finish(tid, self.clock(), None if stopping else outcome)
            self.kick()
        self.reasons.pop(tid, None)
        self.outcomes.conclude(task, inst, n, started, outcome, message, result)

    def arm_queue_timeout(self, task_id: str, seconds: float) -> None:
        old = self.timers.get(task_id)
        if old is not None:
            old.cancel()
        self.timers[task_id] = self.loop.call_later(seconds, self._queue_expired, task_id)

    def _queue_expired(self, task_id: str) -> None:
        self.timers.pop(task_id, None)
        task = self.core.remove(task_id)
        if task is None or self.book.state.get(task_id) is not TaskState.QUEUED:
            return
        msg = f"waited in the queue longer than {task.spec.timeouts.queue_s}s"
        res = TaskResult(task_id=task_id, error_kind=ErrorKind.TIMEOUT, error=msg)
        self.outcomes.finish(task.spec, TaskState.TIMED_OUT, res)

    # -- interruption ----------------------------------------------------------------
    def interrupt(self, task_id: str, reason: Outcome, message: str) -> None:
        """Stop a running attempt; ``reason`` decides what its task becomes."""
        atask = self.running_tasks.get(task_id)
        if atask is None:
            return
        reason = Outcome(reason)
        self.reasons[task_id] = (reason, message)
        atask.cancel()
        placed = self._placed.pop(task_id, None)
        if placed is not None:
            # Cancelled before its first step, the coroutine never runs its body
            # (no try/finally), so the attempt is concluded here.
            task, inst, n = placed
            self.running_tasks.pop(task_id, None)
            self.reasons.pop(task_id, None)
            self.core.finish(task_id, self.clock(), reason)
            self.kick()
            self.outcomes.conclude(task, inst, n, time.time(), reason, message, None)

    async def cancel_local(self, run_id: str, task_id: str | None) -> int:
        book = self.book
        targets = [task_id] if task_id is not None else list(book.tasks_of.get(run_id, []))
        waits: list[asyncio.Task[None]] = []
        n = 0
        for tid in targets:
            st = book.state.get(tid)
            if st is None or st.terminal or book.run_of.get(tid) != run_id:
                continue
            n += 1
            timer = self.timers.pop(tid, None)
            if timer is not None:
                timer.cancel()
            if st in (TaskState.QUEUED, TaskState.RETRYING):
                pending = self.core.remove(tid)
                spec = pending.spec if pending is not None else None
                if spec is None:
                    spec = (await self.metadata.get_task(tid)).spec
                res = TaskResult(task_id=tid, error_kind=ErrorKind.CANCELLED, error="cancelled")
                self.outcomes.finish(spec, TaskState.CANCELLED, res)
            elif tid in self.running_tasks:
                waits.append(self.running_tasks[tid])
                self.interrupt(tid, Outcome.CANCEL, "cancelled")
        if waits:
            await asyncio.gather(*waits, return_exceptions=True)
        return n

    async def abandon_attempts(self) -> None:
        tasks = list(self.running_tasks.values())
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self.running_tasks.clear()
        self._placed.clear()
        self._start_timeouts.close()
        self._deadlines.close()

"""Running attempts: stages, outcomes, retries, timeouts, cancellation.

:class:`AttemptRunner` is the half of the scheduler that owns what happens
to a task once it is placed. It keeps the in-memory view of every task's
state (for progress and for :meth:`Scheduler.wait`), writes each change
through the :class:`StateWriter`, and classifies how an attempt ended:

==========================  ===========================================
executor outcome            task state
==========================  ===========================================
returns a ``TaskResult``    SUCCEEDED
``InfraError``, lost        RETRYING -> QUEUED after backoff, or FAILED
instance                    once ``max_attempts`` infra failures are spent
``AgentError``,             FAILED (final)
``ModelError``
``TimeoutError`` / start    TIMED_OUT (final)
or task deadline passed
cancelled by a user         CANCELLED (the executor gets CancelledError)
preempted                   PREEMPTED -> QUEUED (not a failed attempt)
==========================  ===========================================
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import Counter
from collections.abc import Coroutine
from typing import Any

from megaflow.core.errors import AgentError, Cancelled, InfraError, ModelError
from megaflow.core.events import TaskFailed, TaskFinished, TaskPreempted
from megaflow.core.states import ACTIVE_STATES, TaskState
from megaflow.core.tasks import Attempt, ErrorKind, TaskResult, TaskSpec
from megaflow.scheduler.abstract import STAGES, PendingTask, TaskContext, TaskExecutor
from megaflow.scheduler.cluster import Instance
from megaflow.scheduler.config import SchedulerConfig
from megaflow.scheduler.dispatch import DispatchCore
from megaflow.scheduler.writer import StateWriter
from megaflow.storage.abstract import Transition
from megaflow.storage.factory import Stores

_FINAL = {
    "agent": (TaskState.FAILED, ErrorKind.AGENT),
    "timeout": (TaskState.TIMED_OUT, ErrorKind.TIMEOUT),
    "cancel": (TaskState.CANCELLED, ErrorKind.CANCELLED),
    "error": (TaskState.FAILED, None),
}


class AttemptRunner:
    core: DispatchCore
    writer: StateWriter
    loop: asyncio.AbstractEventLoop

    def __init__(
        self, config: SchedulerConfig, stores: Stores, executor: TaskExecutor, seed: int | None
    ) -> None:
        self.config = config
        self.stores = stores
        self.executor = executor
        self.rng = random.Random(seed)
        self.state: dict[str, TaskState] = {}
        self.run_of: dict[str, str] = {}
        self.tasks_of: dict[str, list[str]] = {}
        self.by_run_state: dict[str, Counter[TaskState]] = {}
        self.open: dict[str, int] = {}
        self.done_events: dict[str, asyncio.Event] = {}
        self.attempts: dict[str, int] = {}
        self.failures: dict[str, int] = {}
        self.running_tasks: dict[str, asyncio.Task[None]] = {}
        self.reasons: dict[str, tuple[str, str]] = {}
        self.timers: dict[str, asyncio.TimerHandle] = {}
        self._start_timers: dict[str, asyncio.TimerHandle] = {}
        self._placed: dict[str, tuple[PendingTask, Instance, int]] = {}
        """Attempts created but not yet entered: cancelling those skips their body."""
        self._spawned: set[asyncio.Task[Any]] = set()

    def kick(self) -> None:
        raise NotImplementedError

    def now(self) -> float:
        raise NotImplementedError

    # -- bookkeeping -------------------------------------------------------------
    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = self.loop.create_task(coro)
        self._spawned.add(task)
        task.add_done_callback(self._spawned.discard)

    def track(self, spec: TaskSpec, state: TaskState) -> None:
        if spec.id in self.state:
            return
        run = spec.run_id
        self.state[spec.id] = state
        self.run_of[spec.id] = run
        self.tasks_of.setdefault(run, []).append(spec.id)
        self.by_run_state.setdefault(run, Counter())[state] += 1
        if not state.terminal:
            self.open[run] = self.open.get(run, 0) + 1
        self.attempts.setdefault(spec.id, 0)
        self.failures.setdefault(spec.id, 0)

    def set_state(self, task_id: str, dst: TaskState, error: str | None = None) -> None:
        src = self.state[task_id]
        run = self.run_of[task_id]
        self.state[task_id] = dst
        counts = self.by_run_state[run]
        counts[src] -= 1
        counts[dst] += 1
        self.writer.transition(Transition(task_id, dst, error=error))
        if dst.terminal:
            self.open[run] -= 1
            if self.open[run] == 0:
                ev = self.done_events.get(run)
                if ev is not None:
                    ev.set()

    def _finish(self, spec: TaskSpec, dst: TaskState, result: TaskResult) -> None:
        self.writer.result(result)
        self.set_state(spec.id, dst, result.error)
        ev = TaskFinished.model_construct(
            ts=time.time(),  # given, so pydantic need not inspect the default factory
            run_id=spec.run_id,
            task_id=spec.id,
            state=dst,
            success=result.success,
            reward=result.reward,
        )
        self.writer.event(ev)

    # -- starting --------------------------------------------------------------------
    def start_attempt(self, task: PendingTask, inst: Instance) -> None:
        tid = task.id
        timer = self.timers.pop(tid, None)
        if timer is not None:
            timer.cancel()
        n = self.attempts[tid] = self.attempts.get(tid, 0) + 1
        self.set_state(tid, TaskState.SCHEDULED)
        self._placed[tid] = (task, inst, n)
        self.running_tasks[tid] = self.loop.create_task(self._attempt(task, inst, n))

    def _report(self, spec: TaskSpec, stage: TaskState) -> None:
        tid = spec.id
        cur = self.state[tid]
        if cur not in ACTIVE_STATES:
            return  # interrupted meanwhile: a late report changes nothing
        at = STAGES.index(cur) if cur in STAGES else -1
        target = STAGES.index(stage)
        if target <= at:
            return
        for s in STAGES[at + 1 : target + 1]:
            self.set_state(tid, s)
        if stage is TaskState.STARTING and spec.timeouts.start_s is not None:
            msg = f"sandbox start took longer than {spec.timeouts.start_s}s"
            self._start_timers[tid] = self.loop.call_later(
                spec.timeouts.start_s, self.interrupt, tid, "timeout", msg
            )
        elif stage is not TaskState.STARTING:
            h = self._start_timers.pop(tid, None)
            if h is not None:
                h.cancel()

    async def _attempt(self, task: PendingTask, inst: Instance, n: int) -> None:
        spec = task.spec
        tid = spec.id
        self._placed.pop(tid, None)
        started = time.time()
        ctx = TaskContext(spec, n, inst.id, inst.spec.region, lambda s: self._report(spec, s))
        deadline = spec.timeouts.deadline_s
        result: TaskResult | None = None
        outcome, message = "ok", ""
        try:
            async with asyncio.timeout(deadline) if deadline else contextlib.nullcontext():
                result = await self.executor.run(ctx)
        except asyncio.CancelledError:
            self.running_tasks.pop(tid, None)
            reason = self.reasons.pop(tid, None)
            if reason is None:
                raise  # the scheduler is stopping: the task stays in flight for resume
            outcome, message = reason
        except InfraError as exc:
            outcome, message = "infra", str(exc)
        except (AgentError, ModelError) as exc:  # a model's error answer is final too
            outcome, message = "agent", str(exc)
        except TimeoutError as exc:
            outcome, message = "timeout", str(exc) or f"task deadline of {deadline}s passed"
        except Cancelled as exc:
            outcome, message = "cancel", str(exc)
        except Exception as exc:
            outcome, message = "error", f"executor raised {type(exc).__name__}: {exc}"
        finally:
            self.running_tasks.pop(tid, None)
            h = self._start_timers.pop(tid, None)
            if h is not None:
                h.cancel()
            self.core.finish(tid, self.now())
            self.kick()
        self.reasons.pop(tid, None)
        self._conclude(task, inst, n, started, outcome, message, result)

    # -- outcomes --------------------------------------------------------------------
    def _conclude(
        self,
        task: PendingTask,
        inst: Instance,
        n: int,
        started: float,
        outcome: str,
        message: str,
        result: TaskResult | None,
    ) -> None:
        spec = task.spec
        tid = spec.id
        now = time.time()
        kind: ErrorKind | None = None
        if outcome in ("infra", "lost"):
            kind = ErrorKind.INFRA
        elif outcome in _FINAL:
            kind = _FINAL[outcome][1]
        self.writer.attempt(
            Attempt.model_construct(
                task_id=tid,
                number=n,
                instance=inst.id,
                started_at=started,
                ended_at=now,
                error_kind=kind,
                error=message or None,
            )
        )
        metrics = getattr(self, "metrics", None)
        if metrics is not None:
            metrics.duration.labels(outcome=outcome).observe(now - started)
            if kind is not None:
                metrics.errors.labels(kind=kind.value).inc()
        if outcome == "ok":
            assert result is not None
            self._report(spec, TaskState.GRADING)
            result.task_id = tid
            self._finish(spec, TaskState.SUCCEEDED, result)
        elif outcome == "preempt":
            self.set_state(tid, TaskState.PREEMPTED, message)
            self.set_state(tid, TaskState.QUEUED)
            self.core.enqueue(task)
            self.writer.event(TaskPreempted(run_id=spec.run_id, task_id=tid))
        elif outcome in ("infra", "lost"):
            self.failures[tid] = self.failures.get(tid, 0) + 1
            retry = self.failures[tid] < spec.max_attempts
            fail = TaskFailed(
                run_id=spec.run_id,
                task_id=tid,
                error_kind=ErrorKind.INFRA,
                error=message,
                will_retry=retry,
            )
            self.writer.event(fail)
            if retry:
                self.set_state(tid, TaskState.RETRYING, message)
                delay = self.backoff(self.failures[tid])
                self.timers[tid] = self.loop.call_later(delay, self._requeue, task)
            else:
                res = TaskResult(task_id=tid, error_kind=ErrorKind.INFRA, error=message)
                self._finish(spec, TaskState.FAILED, res)
        else:
            dst, ek = _FINAL[outcome]
            self._finish(spec, dst, TaskResult(task_id=tid, error_kind=ek, error=message))

    def backoff(self, failures: int) -> float:
        """Exponential backoff with jitter before retry number ``failures``."""
        r = self.config.retry
        delay = min(r.max_s, r.base_s * 2.0 ** (failures - 1))
        return delay * (1 - r.jitter * self.rng.random())

    def _requeue(self, task: PendingTask) -> None:
        self.timers.pop(task.id, None)
        if self.state.get(task.id) is not TaskState.RETRYING:
            return
        self.set_state(task.id, TaskState.QUEUED)
        self.core.enqueue(task)
        self.kick()

    def arm_queue_timeout(self, task_id: str, seconds: float) -> None:
        self.timers[task_id] = self.loop.call_later(seconds, self._queue_expired, task_id)

    def _queue_expired(self, task_id: str) -> None:
        self.timers.pop(task_id, None)
        task = self.core.remove(task_id)
        if task is None or self.state.get(task_id) is not TaskState.QUEUED:
            return
        msg = f"waited in the queue longer than {task.spec.timeouts.queue_s}s"
        res = TaskResult(task_id=task_id, error_kind=ErrorKind.TIMEOUT, error=msg)
        self._finish(task.spec, TaskState.TIMED_OUT, res)

    # -- interruption ----------------------------------------------------------------
    def interrupt(self, task_id: str, reason: str, message: str) -> None:
        """Stop a running attempt; ``reason`` decides what its task becomes."""
        atask = self.running_tasks.get(task_id)
        if atask is None:
            return
        self.reasons[task_id] = (reason, message)
        atask.cancel()
        placed = self._placed.pop(task_id, None)
        if placed is not None:
            # Cancelled before its first step, the coroutine never runs its body
            # (no try/finally), so the attempt is concluded here.
            task, inst, n = placed
            self.running_tasks.pop(task_id, None)
            self.reasons.pop(task_id, None)
            self.core.finish(task_id, self.now())
            self.kick()
            self._conclude(task, inst, n, time.time(), reason, message, None)

    async def cancel_local(self, run_id: str, task_id: str | None) -> int:
        targets = [task_id] if task_id is not None else list(self.tasks_of.get(run_id, []))
        waits: list[asyncio.Task[None]] = []
        n = 0
        for tid in targets:
            st = self.state.get(tid)
            if st is None or st.terminal or self.run_of.get(tid) != run_id:
                continue
            n += 1
            timer = self.timers.pop(tid, None)
            if timer is not None:
                timer.cancel()
            if st in (TaskState.QUEUED, TaskState.RETRYING):
                pending = self.core.remove(tid)
                spec = pending.spec if pending is not None else None
                if spec is None:
                    spec = (await self.stores.metadata.get_task(tid)).spec
                res = TaskResult(task_id=tid, error_kind=ErrorKind.CANCELLED, error="cancelled")
                self._finish(spec, TaskState.CANCELLED, res)
            elif tid in self.running_tasks:
                waits.append(self.running_tasks[tid])
                self.interrupt(tid, "cancel", "cancelled")
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

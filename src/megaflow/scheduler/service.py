"""The control plane: an event-driven dispatcher around :class:`DispatchCore`.

::

    sched = Scheduler(config, stores, executor)        # stores already started
    await sched.start()
    await sched.submit(run, tasks)
    counts = await sched.wait(run.id)                   # every task terminal
    await sched.stop()

Two background tasks and no polling: the :class:`Intake`'s reader turns bus
events (task submitted, capacity freed, instance joined / heartbeat / lost,
task cancelled) into changes of the core and sets a wake flag; the
:class:`Dispatcher` sleeps on that flag and, when woken, runs one planning
round. Timers (retry backoff, a token bucket refilling, a queue timeout, a
heartbeat deadline) are one-shot ``call_later`` handles armed only when
needed.

The scheduler is composed, not inherited. This module holds the public
API and the lifecycle, which builds the parts: a :class:`TaskBook` holds the
task states, an :class:`AttemptRunner` runs placed attempts, a
:class:`FleetWatch` follows the instances, an :class:`Intake` takes events
and tasks in and a :class:`Dispatcher` turns decisions into attempts, each
given its collaborators explicitly.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterable

from megaflow.core.errors import InvalidInput, NotFound
from megaflow.core.events import TaskCancelled, TaskSubmitted
from megaflow.core.lifecycle import Lifecycle
from megaflow.core.states import TaskState
from megaflow.core.tasks import Outcome, RunSpec, TaskSpec
from megaflow.monitoring.scheduler import SchedulerMetrics
from megaflow.scheduler.abstract import FleetProvider, InstanceSpec, PendingTask, TaskExecutor
from megaflow.scheduler.attempts import AttemptRunner
from megaflow.scheduler.autoscale import ThresholdAutoscaler, local_instance
from megaflow.scheduler.book import TaskBook
from megaflow.scheduler.config import SchedulerConfig
from megaflow.scheduler.decision_log import DecisionLog
from megaflow.scheduler.dispatch import DispatchCore
from megaflow.scheduler.dispatcher import Dispatcher
from megaflow.scheduler.fleet import Instance
from megaflow.scheduler.fleet_watch import FleetWatch
from megaflow.scheduler.intake import KINDS, Intake
from megaflow.scheduler.outcomes import backoff
from megaflow.scheduler.writer import StateWriter
from megaflow.storage.abstract import QueuedTask, Subscription
from megaflow.storage.factory import Stores
from megaflow.storage.recovery import RecoveryReport, recover_queue


class Scheduler(Lifecycle):
    """Runs the tasks of one or more runs on a set of instances."""

    loop: asyncio.AbstractEventLoop

    def __init__(
        self,
        config: SchedulerConfig,
        stores: Stores,
        executor: TaskExecutor,
        instances: Iterable[InstanceSpec] | None = None,
        *,
        metrics: SchedulerMetrics | None = None,
        fleet: FleetProvider | None = None,
        seed: int | None = None,
    ) -> None:
        self.config = config
        self.stores = stores
        self.executor = executor
        self.rng = random.Random(seed)
        self.metrics = metrics
        self.fleet = fleet
        self.autoscaler = (
            ThresholdAutoscaler(config.autoscale) if config.autoscale.enabled else None
        )
        self._initial = (
            list(instances) if instances is not None else [local_instance(config.max_concurrency)]
        )
        self._wake = asyncio.Event()
        self._sub: Subscription | None = None
        self._bg: list[asyncio.Task[None]] = []
        self._started = False
        self.writer = StateWriter(stores.metadata, stores.events)
        self.book = TaskBook(self.writer)
        self.core = DispatchCore(config)
        self.runner: AttemptRunner | None = None
        self.fleet_watch: FleetWatch | None = None
        self.dispatcher: Dispatcher | None = None
        self.intake: Intake | None = None
        self.decisions: DecisionLog | None = None
        """The learned policy's recorded decisions (``policy.record``), else None."""

    # -- the shared task book, for progress and tests ---------------------------
    @property
    def state(self) -> dict[str, TaskState]:
        return self.book.state

    @property
    def run_of(self) -> dict[str, str]:
        return self.book.run_of

    @property
    def failures(self) -> dict[str, int]:
        return self.book.failures

    @property
    def events_handled(self) -> int:
        """Bus events read; an idle scheduler does not add to it."""
        return 0 if self.intake is None else self.intake.events_handled

    @property
    def rounds(self) -> int:
        """Planning rounds run; an idle scheduler does not add to it."""
        return 0 if self.dispatcher is None else self.dispatcher.rounds

    def backoff(self, failures: int) -> float:
        """Exponential backoff with jitter before retry number ``failures``."""
        return backoff(self.config.retry, self.rng, failures)

    def _runner(self) -> AttemptRunner:
        if self.runner is None:
            raise RuntimeError("the scheduler is not started: call start() first")
        return self.runner

    def start_attempt(self, task: PendingTask, inst: Instance) -> None:
        self._runner().start_attempt(task, inst)

    def interrupt(self, task_id: str, reason: Outcome | str, message: str) -> None:
        """Stop a running attempt; ``reason`` decides what its task becomes."""
        self._runner().interrupt(task_id, Outcome(reason), message)

    def kick(self) -> None:
        """Wake the dispatcher for a planning round."""
        self._wake.set()

    def now(self) -> float:
        return time.monotonic()

    # -- lifecycle ----------------------------------------------------------------
    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        loop = self.loop = asyncio.get_running_loop()
        decisions = self.decisions = DecisionLog.build(self.config, self.stores.artifacts)
        core = self.core = DispatchCore(
            self.config, None if decisions is None else decisions.make_queue
        )
        if decisions is not None:
            core.listeners.append(decisions.observe)
        kick = self._wake.set
        runner = self.runner = AttemptRunner(
            executor=self.executor, book=self.book, core=core, writer=self.writer,
            metadata=self.stores.metadata, loop=loop, clock=self.now, kick=kick,
            backoff=self.backoff, metrics=self.metrics,
        )  # fmt: skip
        watch = self.fleet_watch = FleetWatch(
            core=core, bus=self.stores.events, loop=loop, clock=self.now, kick=kick,
            interrupt=runner.interrupt, spawn=runner.spawn,
            heartbeat_timeout_s=self.config.heartbeat_timeout_s,
            autoscaler=self.autoscaler, fleet=self.fleet,
        )  # fmt: skip
        self.dispatcher = Dispatcher(
            wake=self._wake, core=core, runner=runner, watch=watch, loop=loop,
            clock=self.now, counts=self.counts, metrics=self.metrics,
        )  # fmt: skip
        intake = self.intake = Intake(
            book=self.book, core=core, runner=runner, watch=watch, queue=self.stores.queue,
            clock=self.now, kick=kick,
        )  # fmt: skip
        self.writer.start()
        now = self.now()
        for spec in self._initial:
            core.add_instance(spec, now)
        await self.executor.start()
        self._sub = await self.stores.events.subscribe(KINDS, maxsize=4096)
        self._bg = [
            loop.create_task(intake.read(self._sub), name="scheduler-reader"),
            loop.create_task(self.dispatcher.run(), name="scheduler-dispatcher"),
        ]

    async def stop(self) -> None:
        """Stop dispatching. Attempts in flight are cancelled and stay in flight in
        the store, exactly as after a crash: :meth:`resume` picks them up."""
        if not self._started:
            return
        self._started = False
        for task in self._bg:
            task.cancel()
        for task in self._bg:
            try:
                await task
            except asyncio.CancelledError:
                pass
        self._bg = []
        runner = self._runner()
        await runner.abandon_attempts()
        for h in runner.timers.values():
            h.cancel()
        for part in (self.fleet_watch, self.dispatcher):
            if part is not None:
                part.close()
        if self._sub is not None:
            await self._sub.close()
            self._sub = None
        if self.decisions is not None:
            await self.decisions.close()
        await self.writer.stop()
        await self.executor.stop()

    # -- public API -----------------------------------------------------------------
    async def submit(self, run: RunSpec, tasks: list[TaskSpec]) -> None:
        """Record the run and its tasks, queue them and tell the dispatcher."""
        md = self.stores.metadata
        try:
            await md.get_run(run.id)
        except NotFound:
            await md.create_run(run)
        for t in tasks:
            if t.run_id != run.id:
                raise InvalidInput(
                    f"task {t.id} belongs to run {t.run_id}, not to {run.id}; "
                    "submit each run's tasks with that run"
                )
        records = await md.add_tasks(tasks)
        if self.intake is not None and self._started:
            # In this process the dispatcher takes them in at once: no round trip
            # through the intake queue. They are QUEUED in the metadata store,
            # which is what resume rebuilds from after a crash.
            self.intake.take_in([(r.spec, r.seq) for r in records])
            self.kick()
        else:
            await self.stores.queue.push([QueuedTask(spec=r.spec, seq=r.seq) for r in records])
        await self.stores.events.publish(
            TaskSubmitted(run_id=run.id, task_ids=[t.id for t in tasks])
        )

    async def resume(self, run_id: str) -> RecoveryReport:
        """Pick a run up after a crash: in-flight attempts are recorded as infra-lost
        and retried, waiting tasks are queued again, terminal ones are left alone."""
        md = self.stores.metadata
        await md.get_run(run_id)
        report = await recover_queue(md, self.stores.queue, run_id)
        for rec in await md.list_tasks(run_id, states=[TaskState.QUEUED]):
            self.book.attempts[rec.id] = rec.attempts
            self.book.failures[rec.id] = rec.attempts - rec.preemptions
        await self.stores.events.publish(TaskSubmitted(run_id=run_id, task_ids=[]))
        return report

    async def wait(self, run_id: str) -> dict[TaskState, int]:
        """Return, with counts by state, once every task of the run is terminal.

        After a restart, call :meth:`resume` first: only tasks the scheduler
        has taken in can finish.
        """
        await self.stores.metadata.get_run(run_id)
        ev = self.book.done_events.setdefault(run_id, asyncio.Event())
        while True:
            ev.clear()
            if self.book.open.get(run_id, 0) == 0:
                await self.writer.flush()
                counts = await self.stores.metadata.count_by_state(run_id)
                if all(s.terminal for s in counts):
                    return counts
            await ev.wait()

    async def cancel(self, run_id: str, task_id: str | None = None) -> int:
        """Cancel one task or every unfinished task of a run; returns how many."""
        n = await self._runner().cancel_local(run_id, task_id)
        await self.stores.events.publish(TaskCancelled(run_id=run_id, task_id=task_id))
        return n

    def counts(self, run_id: str | None = None) -> dict[TaskState, int]:
        """Tasks by state as the scheduler sees them now (for progress bars)."""
        return self.book.counts(run_id)

    @property
    def queue_depth(self) -> int:
        return self.core.depth

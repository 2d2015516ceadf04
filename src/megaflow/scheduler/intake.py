"""What comes into the control plane: bus events and queued tasks.

:class:`Intake` is the scheduler's inbound side. Its reader turns each bus
event into a change of the dispatch state (tasks submitted elsewhere are
popped from the shared intake queue, instances joining, beating or lost go
to the :class:`~megaflow.scheduler.fleet_watch.FleetWatch`, a cancellation to
the :class:`~megaflow.scheduler.attempts.AttemptRunner`) and wakes the
dispatcher after each. :meth:`Intake.take_in` hands queued tasks to the
:class:`~megaflow.scheduler.dispatch.DispatchCore`, once each; an embedded
``submit`` calls it directly, without the queue round trip. Like the other
parts it is given its collaborators explicitly.
"""

from __future__ import annotations

from collections.abc import Callable

from megaflow.core.events import (
    Event,
    InstanceHeartbeat,
    InstanceJoined,
    InstanceLost,
    TaskCancelled,
    TaskSubmitted,
)
from megaflow.core.states import TaskState
from megaflow.core.tasks import TaskSpec
from megaflow.scheduler.abstract import PendingTask
from megaflow.scheduler.attempts import AttemptRunner
from megaflow.scheduler.book import TaskBook
from megaflow.scheduler.dispatch import DispatchCore
from megaflow.scheduler.fleet_watch import FleetWatch
from megaflow.storage.abstract import Subscription, TaskQueue

KINDS = (
    "task_submitted",
    "capacity_freed",
    "instance_joined",
    "instance_heartbeat",
    "instance_lost",
    "task_cancelled",
)
"""The event kinds the scheduler subscribes to."""


class Intake:
    def __init__(
        self,
        *,
        book: TaskBook,
        core: DispatchCore,
        runner: AttemptRunner,
        watch: FleetWatch,
        queue: TaskQueue,
        clock: Callable[[], float],
        kick: Callable[[], None],
    ) -> None:
        self.book = book
        self.core = core
        self.runner = runner
        self.watch = watch
        self.queue = queue
        self.clock = clock
        self.kick = kick
        self.events_handled = 0

    async def read(self, sub: Subscription) -> None:
        """Handle every event of ``sub`` until cancelled, waking the dispatcher after each."""
        async for event in sub:
            self.events_handled += 1
            await self.handle(event)
            self.kick()

    async def handle(self, event: Event) -> None:
        if isinstance(event, TaskSubmitted):
            await self.drain()
        elif isinstance(event, InstanceJoined):
            self.watch.joined(event)
        elif isinstance(event, InstanceHeartbeat):
            self.watch.heartbeat(event.instance)
        elif isinstance(event, InstanceLost):
            self.watch.lost(event.instance, event.reason)
        elif isinstance(event, TaskCancelled):
            await self.runner.cancel_local(event.run_id, event.task_id)

    async def drain(self) -> None:
        """Move every task of the shared intake queue into the dispatcher."""
        queue = self.queue
        items = await queue.pop(await queue.size())
        if not items:
            return
        self.take_in([(i.spec, i.seq) for i in items])
        # The dispatcher holds them now; after a crash the metadata store
        # (not the queue) is what resume rebuilds from.
        await queue.ack([i.task_id for i in items])

    def take_in(self, items: list[tuple[TaskSpec, int]]) -> None:
        """Hand queued tasks (spec, arrival seq) to the dispatcher, once each."""
        now = self.clock()
        book, core, runner = self.book, self.core, self.runner
        state, queued = book.state, TaskState.QUEUED
        for spec, seq in items:
            if state.get(spec.id, queued) is not queued:
                continue
            book.track(spec, queued)
            core.enqueue(PendingTask(spec, seq, now))
            if spec.timeouts.queue_s is not None:
                runner.arm_queue_timeout(spec.id, spec.timeouts.queue_s)

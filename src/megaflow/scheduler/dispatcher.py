"""The planning loop: one round of decisions per wake-up, and nothing while idle.

:class:`Dispatcher` sleeps on a wake flag (an ``asyncio.Event``) that
anything able to change a decision sets: a task arriving, a slot freed, an
instance joining, a retry's backoff ending. Each wake runs one round: the
:class:`DispatchCore` plans, every decision's victims are preempted and its
attempt started, the gauges are updated, a timer is armed for the earliest
token a refused rate limit will have, and the fleet watch may scale. The
round is the only place decisions turn into attempts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from megaflow.core.states import TaskState
from megaflow.core.tasks import Outcome
from megaflow.monitoring.scheduler import SchedulerMetrics
from megaflow.scheduler.attempts import AttemptRunner
from megaflow.scheduler.dispatch import DispatchCore
from megaflow.scheduler.fleet_watch import FleetWatch


class Dispatcher:
    def __init__(
        self,
        *,
        wake: asyncio.Event,
        core: DispatchCore,
        runner: AttemptRunner,
        watch: FleetWatch,
        loop: asyncio.AbstractEventLoop,
        clock: Callable[[], float],
        counts: Callable[[], dict[TaskState, int]],
        metrics: SchedulerMetrics | None = None,
    ) -> None:
        self.wake = wake
        self.core = core
        self.runner = runner
        self.watch = watch
        self.loop = loop
        self.clock = clock
        self.counts = counts
        self.metrics = metrics
        self.rounds = 0
        """Planning rounds run; an idle scheduler does not add to it."""
        self._refill: asyncio.TimerHandle | None = None

    async def run(self) -> None:
        wake = self.wake
        while True:
            await wake.wait()
            wake.clear()
            self.rounds += 1
            await self.round()

    def close(self) -> None:
        if self._refill is not None:
            self._refill.cancel()
            self._refill = None

    async def round(self) -> None:
        core, runner = self.core, self.runner
        now = self.clock()
        decisions = core.plan(now)
        for d in decisions:
            for victim in d.preempt:
                runner.interrupt(victim, Outcome.PREEMPT, f"preempted by {d.task.id}")
            runner.start_attempt(d.task, d.instance)
        metrics = self.metrics
        if metrics is not None:
            metrics.decisions.inc(len(decisions))
            metrics.queue_depth.set(core.depth)
            metrics.fragmentation.set(core.fragmentation())
            metrics.set_states({s.value: n for s, n in self.counts().items()})
        refill = core.admission.next_refill
        if refill is not None and core.depth and self._refill is None:
            self._refill = self.loop.call_later(max(0.0, refill - now), self._refilled)
        await self.watch.autoscale(now)

    def _refilled(self) -> None:
        self._refill = None
        self.wake.set()

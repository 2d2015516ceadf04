"""The fleet's side of the control plane: instances joining, beating, lost, and scaling.

:class:`FleetWatch` keeps the dispatch core's instances in step with the
world. An instance that joins (``InstanceJoined``) must send a heartbeat
within ``heartbeat_timeout_s`` or it is declared lost (``InstanceLost`` is
published, so every listener hears of it); a lost instance's running tasks
are interrupted as infrastructure failures. With an autoscaler and a fleet
provider, each planning round asks the autoscaler whether to add or release
instances and arms a one-shot timer for its next check. Like the
:class:`~megaflow.scheduler.attempts.AttemptRunner`, it is given its
collaborators: the core, the loop, a clock, ``kick``, ``interrupt`` and
``spawn`` callbacks, and the bus to publish a loss on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from megaflow.core.events import InstanceJoined, InstanceLost
from megaflow.core.tasks import Outcome
from megaflow.scheduler.abstract import FleetProvider, InstanceSpec
from megaflow.scheduler.autoscale import ThresholdAutoscaler
from megaflow.scheduler.dispatch import DispatchCore
from megaflow.storage.abstract import EventBus


class FleetWatch:
    def __init__(
        self,
        *,
        core: DispatchCore,
        bus: EventBus,
        loop: asyncio.AbstractEventLoop,
        clock: Callable[[], float],
        kick: Callable[[], None],
        interrupt: Callable[[str, Outcome, str], None],
        spawn: Callable[[Coroutine[Any, Any, Any]], None],
        heartbeat_timeout_s: float,
        autoscaler: ThresholdAutoscaler | None = None,
        fleet: FleetProvider | None = None,
    ) -> None:
        self.core = core
        self.bus = bus
        self.loop = loop
        self.clock = clock
        self.kick = kick
        self.interrupt = interrupt
        self.spawn = spawn
        self.heartbeat_timeout_s = heartbeat_timeout_s
        self.autoscaler = autoscaler
        self.fleet = fleet
        self.heartbeats: dict[str, asyncio.TimerHandle] = {}
        self._scale_timer: asyncio.TimerHandle | None = None

    def close(self) -> None:
        for h in self.heartbeats.values():
            h.cancel()
        self.heartbeats.clear()
        if self._scale_timer is not None:
            self._scale_timer.cancel()
            self._scale_timer = None

    # -- membership ----------------------------------------------------------------
    def joined(self, event: InstanceJoined) -> None:
        cap = event.capacity
        spec = InstanceSpec(
            id=event.instance,
            region=event.region,
            cpu=float(cap.get("cpu", 1.0)),
            memory_mb=int(cap.get("memory_mb", 1024)),
            gpu=int(cap.get("gpu", 0)),
            slots=int(cap.get("slots", 1)),
        )
        if self.core.instance(spec.id) is None:
            self.core.add_instance(spec, self.clock())
        self._arm_heartbeat(spec.id)

    def heartbeat(self, inst_id: str) -> None:
        if inst_id in self.heartbeats:
            self._arm_heartbeat(inst_id)

    def _arm_heartbeat(self, inst_id: str) -> None:
        old = self.heartbeats.pop(inst_id, None)
        if old is not None:
            old.cancel()
        lost = InstanceLost(instance=inst_id, reason="no heartbeat")
        self.heartbeats[inst_id] = self.loop.call_later(
            self.heartbeat_timeout_s, lambda: self.spawn(self.bus.publish(lost))
        )

    def lost(self, inst_id: str, reason: str) -> None:
        h = self.heartbeats.pop(inst_id, None)
        if h is not None:
            h.cancel()
        for task in self.core.remove_instance(inst_id, now=self.clock()):
            msg = f"instance {inst_id} lost: {reason or 'no reason'}"
            self.interrupt(task.id, Outcome.LOST, msg)

    # -- scaling ---------------------------------------------------------------------
    async def autoscale(self, now: float) -> None:
        """Ask the autoscaler once; a no-op without an autoscaler and a fleet provider."""
        if self.autoscaler is None or self.fleet is None:
            return
        core = self.core
        insts = [i for r in core.regions.values() for i in r.instances.values()]
        idle = [(i.id, i.idle_since) for i in insts if not i.running]
        up, down = self.autoscaler.evaluate(now, core.depth, len(insts), idle)
        if up:
            for spec in await self.fleet.scale_up(up):
                core.add_instance(spec, now)
            self.kick()
        if down:
            await self.fleet.scale_down(down)
            for inst_id in down:
                core.remove_instance(inst_id)
        at = self.autoscaler.next_check(now)
        if at is not None and self._scale_timer is None:
            self._scale_timer = self.loop.call_later(at - now + 1e-3, self._scale_due)

    def _scale_due(self) -> None:
        self._scale_timer = None
        self.kick()

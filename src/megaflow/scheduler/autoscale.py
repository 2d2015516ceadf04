"""Autoscaling: a threshold/idle policy and the static fleet of one machine.

:class:`ThresholdAutoscaler` is pure logic on the time it is given: it asks
for ``step`` more instances once the queue has stayed over the threshold for
``sustain_s``, and releases instances idle for ``idle_s``. The scheduler and
the simulator (with its simulated fleet) both call it.
"""

from __future__ import annotations

import os

from megaflow.scheduler.abstract import FleetProvider, InstanceSpec
from megaflow.scheduler.config import AutoscaleConfig


def local_instance(slots: int, instance_id: str = "local") -> InstanceSpec:
    """This machine as one instance: its CPU count and memory, ``slots`` tasks at once."""
    cpus = os.cpu_count() or 1
    try:
        mem_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)
    except (ValueError, OSError, AttributeError):
        mem_mb = 4096
    # Tasks declare what they need; a laptop runs more light tasks than it has
    # cores, so capacity is scaled to the slots it is asked to hold.
    return InstanceSpec(
        id=instance_id,
        cpu=float(max(cpus, slots)),
        memory_mb=max(int(mem_mb), 1024 * slots),
        gpu=0,
        slots=slots,
    )


class StaticFleet(FleetProvider):
    """A fixed set of instances: never grows, never shrinks."""

    def __init__(self, instances: list[InstanceSpec]) -> None:
        self.instances = list(instances)

    async def scale_up(self, n: int) -> list[InstanceSpec]:
        return []

    async def scale_down(self, ids: list[str]) -> None:
        return None


class ThresholdAutoscaler:
    def __init__(self, cfg: AutoscaleConfig) -> None:
        self.cfg = cfg
        self.over_since: float | None = None

    def evaluate(
        self,
        now: float,
        depth: int,
        instances: int,
        idle: list[tuple[str, float]],
        *,
        booting: int = 0,
        per_instance: int = 1,
    ) -> tuple[int, list[str]]:
        """How many instances to add, and which idle ones to release.

        ``idle`` lists ``(instance id, idle since)`` of instances running nothing;
        ``booting`` instances are on their way and hold ``per_instance`` tasks each,
        so they are not asked for twice.
        """
        cfg = self.cfg
        up = 0
        if depth > cfg.queue_threshold:
            if self.over_since is None:
                self.over_since = now
            if now - self.over_since >= cfg.sustain_s:
                need = -(-depth // max(1, per_instance)) - booting
                room = cfg.max_instances - instances - booting
                up = max(0, min(cfg.step, room, need))
                self.over_since = now  # the next step needs another sustained window
        else:
            self.over_since = None
        down: list[str] = []
        if depth == 0:
            spare = max(0, instances - cfg.min_instances)
            down = [i for i, since in idle if now - since >= cfg.idle_s][:spare]
        return up, down

    def next_check(self, now: float) -> float | None:
        """When a sustained queue would next trigger a scale-up (None if not over)."""
        if self.over_since is None:
            return None
        return max(now, self.over_since + self.cfg.sustain_s)

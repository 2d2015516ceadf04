"""A discrete-event simulation of a cluster, driving the real dispatcher.

The simulator owns a virtual clock and a heap of future events (arrivals,
task ends, token-bucket refills, instances booting, autoscaler checks). At
each instant it applies the events and asks the very
:class:`~megaflow.scheduler.dispatch.DispatchCore` the scheduler uses (same
policies, per-type queues, admission, best-fit placement, preemption) for
decisions. What it does not simulate is the I/O shell around that core: the
metadata store, the event bus and the executors are replaced by the event
heap, and a task simply holds its slot for its traced duration plus a
sandbox start time.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from megaflow.core.tasks import Outcome, Resources, TaskSpec, TaskType
from megaflow.scheduler.abstract import FleetProvider, InstanceSpec, PendingTask, SchedulingPolicy
from megaflow.scheduler.autoscale import ThresholdAutoscaler
from megaflow.scheduler.config import SchedulerConfig
from megaflow.scheduler.dispatch import DispatchCore
from megaflow.sim.report import SimReport, summarize
from megaflow.sim.trace import TraceTask

_ARRIVE, _BOOT, _FINISH, _WAKE, _SCALE = range(5)


class SimulatedFleet(FleetProvider):
    """Instances of one shape that take ``boot_s`` of virtual time to come up."""

    def __init__(self, template: InstanceSpec, boot_s: float = 60.0, limit: int = 100_000):
        self.template = template
        self.boot_s = boot_s
        self.limit = limit
        self.granted = 0
        self.released: list[str] = []

    async def scale_up(self, n: int) -> list[InstanceSpec]:
        n = max(0, min(n, self.limit - self.granted + len(self.released)))
        out = []
        t = self.template
        for _ in range(n):
            self.granted += 1
            iid = f"sim-{self.granted}"
            out.append(InstanceSpec(iid, t.region, t.cpu, t.memory_mb, t.gpu, t.slots))
        return out

    async def scale_down(self, ids: list[str]) -> None:
        self.released.extend(ids)


@dataclass
class SimOptions:
    sandbox_start_s: float = 5.0
    """Virtual time from placement until the task starts working."""
    frag_every: int = 16
    """Sample the fragmentation figure every this many planning rounds (after the round's
    placements, when tasks still wait)."""
    autoscale_every_s: float = 10.0
    """Virtual seconds between autoscaler checks (when autoscaling)."""


@dataclass
class _Stats:
    start: list[float] = field(default_factory=list)
    end: list[float] = field(default_factory=list)
    preemptions: int = 0
    rounds: int = 0
    frag: list[float] = field(default_factory=list)
    busy_cpu_s: float = 0.0
    cap_cpu_s: float = 0.0
    peak_instances: int = 0


class Simulator:
    def __init__(
        self,
        config: SchedulerConfig,
        instances: list[InstanceSpec],
        trace: list[TraceTask],
        *,
        fleet: SimulatedFleet | None = None,
        options: SimOptions | None = None,
        policy: Callable[[], SchedulingPolicy] | None = None,
    ) -> None:
        """``policy`` builds each region's queue instead of ``config.policy``."""
        self.config = config
        self.core = DispatchCore(config, policy)
        self.instances = instances
        self.trace = trace
        self.fleet = fleet
        self.opt = options or SimOptions()
        self.autoscaler = (
            ThresholdAutoscaler(config.autoscale)
            if fleet is not None and config.autoscale.enabled
            else None
        )
        self.now = 0.0
        self._heap: list[tuple[float, int, int, Any]] = []
        self._seq = 0
        self._token: dict[str, int] = {}
        self._pending: dict[str, PendingTask] = {}
        self._wake_at: float | None = None
        self._cap_mcpu = 0
        self._cap_since = 0.0
        self._left = len(trace)
        self._booting = 0
        self._stats = _Stats()

    def _push(self, t: float, kind: int, payload: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, self._seq, kind, payload))

    def _capacity(self, delta_mcpu: int, st: _Stats) -> None:
        st.cap_cpu_s += self._cap_mcpu / 1000 * (self.now - self._cap_since)
        self._cap_since = self.now
        self._cap_mcpu += delta_mcpu

    async def run(self) -> SimReport:
        st = _Stats(start=[math.nan] * len(self.trace), end=[math.nan] * len(self.trace))
        for spec in self.instances:
            self.core.add_instance(spec, 0.0)
            self._capacity(round(spec.cpu * 1000), st)
        st.peak_instances = len(self.instances)
        index: dict[str, int] = {}
        shapes: dict[tuple[float, int, int], Resources] = {}
        for i, tt in enumerate(self.trace):
            self._push(tt.arrival_s, _ARRIVE, i)
        if self.autoscaler is not None:
            self._push(0.0, _SCALE, None)
        core = self.core
        heap = self._heap
        while heap and self._left:
            self.now = now = heap[0][0]
            while heap and heap[0][0] == now:
                _, _, kind, payload = heapq.heappop(heap)
                if kind == _ARRIVE:
                    self._arrive(payload, shapes, index)
                elif kind == _FINISH:
                    self._finished(payload[0], payload[1], index, st)
                elif kind == _WAKE:
                    self._wake_at = None
                elif kind == _BOOT:
                    self._booting -= 1
                    core.add_instance(payload, now)
                    self._capacity(round(payload.cpu * 1000), st)
                elif kind == _SCALE:
                    await self._autoscale(st)
            self._plan(st, index)
        self._capacity(0, st)
        self._stats = st
        return summarize(self.trace, st.start, st.end, st.busy_cpu_s, st.cap_cpu_s, st.frag,
                         st.preemptions, st.peak_instances, st.rounds)  # fmt: skip

    def _arrive(
        self, i: int, shapes: dict[tuple[float, int, int], Resources], index: dict[str, int]
    ) -> None:
        tt = self.trace[i]
        key = (tt.cpu, tt.memory_mb, tt.gpu)
        res = shapes.get(key)
        if res is None:
            res = shapes[key] = Resources(cpu=tt.cpu, memory_mb=tt.memory_mb, gpu=tt.gpu)
        # Trace rows are validated on load; skipping validation here keeps 100k arrivals cheap.
        spec = TaskSpec.model_construct(
            id=f"t{i}", run_id=tt.run, type=TaskType(tt.type), priority=tt.priority,
            tenant=tt.tenant, resources=res,
        )  # fmt: skip
        index[spec.id] = i
        self._pending[spec.id] = self.core.submit(spec, self.now, seq=i + 1)

    def _finished(self, tid: str, token: int, index: dict[str, int], st: _Stats) -> None:
        if self._token.get(tid) != token:
            return  # that attempt was preempted
        del self._token[tid]
        self.core.finish(tid, self.now, Outcome.OK)
        i = index[tid]
        st.end[i] = self.now
        st.busy_cpu_s += self.trace[i].cpu * (self.now - st.start[i])
        del self._pending[tid]
        self._left -= 1

    def waits(self) -> list[float]:
        """Queue wait of each trace task (last placement), after :meth:`run`."""
        return [s - t.arrival_s for s, t in zip(self._stats.start, self.trace, strict=True)]

    def mean_wait(self, pick: Callable[[TraceTask], bool]) -> float:
        """Mean queue wait of the trace tasks ``pick`` selects, after :meth:`run`."""
        w = [w for w, t in zip(self.waits(), self.trace, strict=True) if pick(t)]
        return sum(w) / len(w) if w else math.nan

    def _plan(self, st: _Stats, index: dict[str, int]) -> None:
        core = self.core
        now = self.now
        if not core.pending:
            return
        st.rounds += 1
        decisions = core.plan(now)
        if st.rounds % self.opt.frag_every == 0 and core.pending:
            st.frag.append(core.fragmentation())  # after placing: what waiting tasks cannot use
        for d in decisions:
            for victim in d.preempt:
                st.preemptions += 1
                # A new token: the preempted attempt's end event no longer matches.
                self._token[victim] = self._token.get(victim, 0) + 1
                i = index[victim]
                st.busy_cpu_s += self.trace[i].cpu * (now - st.start[i])
                core.enqueue(self._pending[victim])
            tid = d.task.id
            i = index[tid]
            st.start[i] = now
            token = self._token[tid] = self._token.get(tid, 0) + 1
            self._push(
                now + self.opt.sandbox_start_s + self.trace[i].duration_s, _FINISH, (tid, token)
            )
        refill = core.admission.next_refill
        if refill is not None and core.pending and self._wake_at is None:
            self._wake_at = refill
            self._push(refill, _WAKE, None)

    async def _autoscale(self, st: _Stats) -> None:
        if self.autoscaler is None or self.fleet is None:
            return
        core, now = self.core, self.now
        insts = [i for r in core.regions.values() for i in r.instances.values()]
        st.peak_instances = max(st.peak_instances, len(insts))
        idle: list[tuple[str, float]] = []
        if not core.pending:
            idle = [(i.id, i.idle_since) for i in insts if not i.running]
        up, down = self.autoscaler.evaluate(
            now, core.depth, len(insts), idle, booting=self._booting,
            per_instance=self.fleet.template.slots,
        )  # fmt: skip
        for spec in await self.fleet.scale_up(up):
            self._booting += 1
            self._push(now + self.fleet.boot_s, _BOOT, spec)
        if down:
            await self.fleet.scale_down(down)
            for iid in down:
                inst = core.instance(iid)
                if inst is not None:
                    self._capacity(-round(inst.spec.cpu * 1000), st)
                    core.remove_instance(iid)
        if self._left:
            self._push(now + self.opt.autoscale_every_s, _SCALE, None)

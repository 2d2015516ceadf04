"""The dispatcher's decision core: regions, queues, admission, placement, preemption.

:class:`DispatchCore` holds no clock, no I/O and no asyncio: it is told the
time and returns decisions. The :class:`~megaflow.scheduler.service.Scheduler`
drives it from events on the wall clock; the simulator drives the very same
object on a virtual clock. Every region has its own queue (a
:class:`SchedulingPolicy`); a task is sharded on arrival to the region with
the most free slots left after what already waits there.

Feedback: whoever releases a slot says how the placement ended
(:meth:`DispatchCore.finish` with an :class:`~megaflow.core.tasks.Outcome`;
preemption and a lost instance are known here), and the core hands one
:class:`~megaflow.scheduler.abstract.TaskFeedback` per placement to the
policy of the queue that placed it and to every function in ``listeners``.
A policy hears it by overriding :meth:`SchedulingPolicy.observe`; when
neither that policy nor any listener would hear it, none is built (the
shipped rule-based policies do not learn, and a no-op task's feedback was
about 3-6% of its control-plane samples).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from megaflow.core.tasks import Outcome, Resources, TaskSpec
from megaflow.scheduler.abstract import (
    Decision,
    InstanceSpec,
    PendingTask,
    SchedulingPolicy,
    TaskFeedback,
)
from megaflow.scheduler.admission import Admission
from megaflow.scheduler.config import SchedulerConfig
from megaflow.scheduler.fleet import Instance, Region, fragmentation
from megaflow.scheduler.policies import make_policy

_Shape = tuple[float, int, int]


def _hears(policy: SchedulingPolicy) -> bool:
    """Whether ``policy`` does anything with feedback (it overrides ``observe``)."""
    return getattr(policy.observe, "__func__", None) is not SchedulingPolicy.observe


@dataclass(slots=True)
class Placed:
    task: PendingTask
    inst: Instance
    region: Region
    at: float = 0.0


class DispatchCore:
    """Which waiting task runs where, now. Synchronous and clock-free.

    ``make_queue`` builds each region's policy instead of ``cfg.policy`` (the
    simulator's step interface passes a policy whose choices come from outside).
    """

    def __init__(
        self, cfg: SchedulerConfig, make_queue: Callable[[], SchedulingPolicy] | None = None
    ) -> None:
        self.cfg = cfg
        self._make_queue = make_queue
        self.admission = Admission(cfg.admission, cfg.max_concurrency)
        self.regions: dict[str, Region] = {}
        self.queues: dict[str, SchedulingPolicy] = {}
        self._hears: dict[str, bool] = {}
        """By region: whether its queue's policy hears feedback."""
        self.queued: dict[str, int] = {}
        self.pending: dict[str, PendingTask] = {}
        self.running: dict[str, Placed] = {}
        self._shapes: dict[_Shape, int] = {}
        """Queued tasks by shape (a plain dict: a ``Counter`` item update costs twice as much)."""
        self._region_of: dict[str, str] = {}
        self._needs_cache: list[Resources] | None = None
        self._seq = 0
        self.listeners: list[Callable[[TaskFeedback], None]] = []
        """Called with the feedback of every placement, after its policy."""

    # -- fleet -----------------------------------------------------------------
    def region(self, name: str) -> Region:
        r = self.regions.get(name)
        if r is None:
            r = self.regions[name] = Region(name, self.cfg.admission.max_per_region.get(name))
            self.queues[name] = (
                self._make_queue()
                if self._make_queue is not None
                else make_policy(self.cfg.policy, self.cfg.queues, self.cfg.queue_weights)
            )
            self._hears[name] = _hears(self.queues[name])
            self.queued[name] = 0
        return r

    def add_instance(self, spec: InstanceSpec, now: float = 0.0) -> Instance:
        inst = Instance.from_spec(spec, now)
        self.region(spec.region).add(inst)
        return inst

    def remove_instance(
        self, inst_id: str, region: str | None = None, now: float | None = None
    ) -> list[PendingTask]:
        """Drop an instance; returns the tasks that were running on it (now unplaced,
        their placements ended as ``lost`` at ``now``)."""
        for r in [self.regions[region]] if region else list(self.regions.values()):
            inst = r.remove(inst_id)
            if inst is None:
                continue
            lost = []
            for task_id in list(inst.running):
                placed = self.running.pop(task_id)
                self.admission.done(placed.task.spec.run_id)
                inst.running.pop(task_id)
                lost.append(placed.task)
                self._feedback(placed, Outcome.LOST, placed.at if now is None else now)
            return lost
        return []

    def instance(self, inst_id: str) -> Instance | None:
        for r in self.regions.values():
            inst = r.instances.get(inst_id)
            if inst is not None:
                return inst
        return None

    # -- queue -----------------------------------------------------------------
    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def enqueue(self, task: PendingTask) -> None:
        """Queue a task in the region with the most room for it."""
        tid = task.spec.id
        if tid in self.pending or tid in self.running:
            return  # already waiting or running: never twice
        task.removed = False
        if len(self.regions) == 1:
            name = next(iter(self.regions))
        elif not self.regions:
            name = self.region("default").name
        else:
            name = max(self.regions, key=lambda n: self.regions[n].free_slots - self.queued[n])
        self.queues[name].push(task)
        self.queued[name] += 1
        self.pending[tid] = task
        self._region_of[tid] = name
        shape = self._shape(task.spec)
        shapes = self._shapes
        n = shapes.get(shape)
        if n is None:
            self._needs_cache = None
            shapes[shape] = 1
        else:
            shapes[shape] = n + 1

    def submit(self, spec: TaskSpec, now: float, seq: int | None = None) -> PendingTask:
        task = PendingTask(spec, self.next_seq() if seq is None else seq, now)
        self.enqueue(task)
        return task

    def _needs(self) -> list[Resources]:
        if self._needs_cache is None:
            self._needs_cache = [Resources.model_construct(cpu=c, memory_mb=m, gpu=g)
                                 for c, m, g in self._shapes]  # fmt: skip
        return self._needs_cache

    @staticmethod
    def _shape(spec: TaskSpec) -> _Shape:
        r = spec.resources
        return (r.cpu, r.memory_mb, r.gpu)

    def _unqueue(self, task: PendingTask) -> None:
        tid = task.spec.id
        self.pending.pop(tid, None)
        name = self._region_of.pop(tid)
        self.queued[name] -= 1
        shape = self._shape(task.spec)
        shapes = self._shapes
        n = shapes[shape] - 1
        if n <= 0:
            del shapes[shape]
            self._needs_cache = None
        else:
            shapes[shape] = n

    def remove(self, task_id: str) -> PendingTask | None:
        """Take a waiting task out of the queue (cancellation, queue timeout)."""
        task = self.pending.get(task_id)
        if task is None:
            return None
        task.removed = True
        self._unqueue(task)
        return task

    @property
    def depth(self) -> int:
        return len(self.pending)

    # -- decisions -------------------------------------------------------------
    def plan(self, now: float) -> list[Decision]:
        """Place every waiting task that fits and is admitted now."""
        adm = self.admission
        adm.reset_round()
        out: list[Decision] = []

        def admit(task: PendingTask, inst: Instance) -> bool:
            return adm.admit(task, inst, now)

        for name, region in self.regions.items():
            if not self.queued[name]:
                continue
            limit = min(self.cfg.max_concurrency - adm.running, region.free_slots)
            if limit > 0 and not region.hopeless(self._needs()):
                queue = self.queues[name]
                queue.now = now
                made = queue.decide(region, admit, limit, self.cfg.scan_limit)
                for d in made:
                    self._unqueue(d.task)
                    self.running[d.task.id] = Placed(d.task, d.instance, region, now)
                out.extend(made)
            if self.cfg.preemption and self.queued[name]:
                out.extend(self._preempt(name, region, now))
        return out

    def finish(self, task_id: str, now: float, outcome: Outcome | None = None) -> bool:
        """A running task let go of its slot. False if it was not running.

        ``outcome`` is how the placement ended, given to its policy; None (the
        scheduler stopping, the attempt left in flight) gives no feedback."""
        placed = self.running.pop(task_id, None)
        if placed is None:
            return False
        placed.region.release(placed.inst, task_id, now)
        self.admission.done(placed.task.spec.run_id)
        if outcome is not None:
            self._feedback(placed, outcome, now)
        return True

    def _feedback(self, placed: Placed, outcome: Outcome, now: float) -> None:
        if outcome is Outcome.PREEMPT:
            placed.task.preemptions += 1
        name = placed.region.name
        hears = self._hears[name]
        if not hears and not self.listeners:
            return
        fb = TaskFeedback(placed.task, outcome, placed.inst.id, placed.at, now)
        if hears:
            self.queues[name].observe(fb)
        for listener in self.listeners:
            listener(fb)

    # -- preemption --------------------------------------------------------------
    def _preempt(self, name: str, region: Region, now: float) -> list[Decision]:
        queue = self.queues[name]
        out: list[Decision] = []
        while self.queued[name]:
            task = queue.pop()
            if task is None:
                break
            if task.removed:
                continue
            victim = self._victim(queue, region, task)
            if victim is None:
                queue.push_back([task])
                break
            self.finish(victim.task.id, now)
            inst = region.best_fit(task.spec.resources)
            if inst is None or not self.admission.admit(task, inst, now):
                # Could not use the room after all: keep the victim running.
                region.reserve(victim.inst, victim.task.spec)
                self.admission.running += 1
                run_id = victim.task.spec.run_id
                self.admission.per_run[run_id] = self.admission.per_run.get(run_id, 0) + 1
                self.running[victim.task.id] = victim
                queue.push_back([task])
                break
            region.reserve(inst, task.spec)
            self._unqueue(task)
            self.running[task.id] = Placed(task, inst, region, now)
            self._feedback(victim, Outcome.PREEMPT, now)
            out.append(Decision(task, inst, preempt=[victim.task.id]))
        return out

    def _victim(self, queue: SchedulingPolicy, region: Region, task: PendingTask) -> Placed | None:
        """The lowest-priority running task whose room would let ``task`` fit."""
        need = task.spec.resources
        mine = queue.priority_of(task.spec)
        best: Placed | None = None
        best_p = 0.0
        for placed in self.running.values():
            if placed.region is not region:
                continue
            p = queue.priority_of(placed.task.spec)
            if p >= mine or (best is not None and p >= best_p):
                continue
            inst, vr = placed.inst, placed.task.spec.resources
            if (
                inst.mcpu + round(vr.cpu * 1000) >= round(need.cpu * 1000)
                and inst.memory_mb + vr.memory_mb >= need.memory_mb
                and inst.gpu + vr.gpu >= need.gpu
            ):
                best, best_p = placed, p
        return best

    # -- figures -----------------------------------------------------------------
    def smallest_queued(self) -> Resources | None:
        if not self._shapes:
            return None
        cpu, mem, gpu = min(self._shapes)
        return Resources(cpu=cpu, memory_mb=mem, gpu=gpu)

    def fragmentation(self) -> float:
        """Free resources that no queued task fits, over all free resources
        (:func:`~megaflow.scheduler.fleet.fragmentation`)."""
        return fragmentation(list(self.regions.values()), self._needs())

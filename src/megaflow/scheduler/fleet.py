"""The fleet as the dispatcher sees it: instances and regions, with best-fit placement
and the fragmentation figure.

A :class:`Region` owns its instances and indexes them by free capacity:
instances with the same capacity and the same free CPU, memory, GPU and
slots share one bucket, so best fit looks at the (few) distinct shapes
instead of at every instance. That keeps a decision cheap at 10,000
instances. CPU is kept in millicores so that sums never drift.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from megaflow.core.tasks import Resources, TaskSpec
from megaflow.scheduler.abstract import InstanceSpec

_Key = tuple[int, int, int, int, int, int, int]


def _need(res: Resources) -> tuple[int, int, int]:
    return round(res.cpu * 1000), res.memory_mb, res.gpu


@dataclass(eq=False, slots=True)
class Instance:
    """An instance as the dispatcher sees it: capacity, what is free, what runs."""

    spec: InstanceSpec
    mcpu: int
    memory_mb: int
    gpu: int
    slots: int
    running: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    """Tasks running here, by id: what each holds (millicores, MB, GPUs)."""
    alive: bool = True
    idle_since: float = 0.0
    cap_mcpu: int = field(init=False, repr=False)
    """The spec's CPU in millicores, computed once (it is part of every index key)."""

    def __post_init__(self) -> None:
        self.cap_mcpu = round(self.spec.cpu * 1000)

    @classmethod
    def from_spec(cls, spec: InstanceSpec, now: float = 0.0) -> Instance:
        return cls(
            spec, round(spec.cpu * 1000), spec.memory_mb, spec.gpu, spec.slots, idle_since=now
        )

    @property
    def id(self) -> str:
        return self.spec.id

    def key(self) -> _Key:
        s = self.spec
        return (
            self.mcpu,
            self.memory_mb,
            self.gpu,
            self.slots,
            self.cap_mcpu,
            s.memory_mb,
            s.gpu,
        )

    def fits(self, res: Resources) -> bool:
        c, m, g = _need(res)
        return self.slots >= 1 and self.mcpu >= c and self.memory_mb >= m and self.gpu >= g


class Region:
    """A region's instances, indexed by free capacity for best-fit placement."""

    def __init__(self, name: str, cap: int | None = None) -> None:
        self.name = name
        self.cap = cap
        """Tasks running at once in this region; None for no cap."""
        self.instances: dict[str, Instance] = {}
        self.running = 0
        self.total_slots = 0
        self._nofit: set[tuple[int, int, int]] = set()
        """Needs known not to fit; capacity only shrinks until the next release."""
        self._index: dict[_Key, dict[str, Instance]] = {}

    # -- membership ------------------------------------------------------------
    def add(self, inst: Instance) -> None:
        self.instances[inst.id] = inst
        self.total_slots += inst.spec.slots
        self._nofit.clear()
        self._index_add(inst)

    def remove(self, inst_id: str) -> Instance | None:
        inst = self.instances.pop(inst_id, None)
        if inst is not None:
            self._index_drop(inst)
            inst.alive = False
            self.running -= len(inst.running)
            self.total_slots -= inst.spec.slots
        return inst

    def _index_add(self, inst: Instance) -> None:
        self._index.setdefault(inst.key(), {})[inst.id] = inst

    def _index_drop(self, inst: Instance) -> None:
        key = inst.key()
        bucket = self._index.get(key)
        if bucket is not None:
            bucket.pop(inst.id, None)
            if not bucket:
                del self._index[key]

    # -- placement -------------------------------------------------------------
    def best_fit(self, res: Resources) -> Instance | None:
        """The instance where the task leaves the least of its binding resource unused.

        The binding resource is the one the task asks the largest share of (of the
        instance's capacity): packing by it keeps the room that is scarce for this task
        in as few instances as possible, so that large tasks still find a whole gap.
        Ties (and a second order) go by the summed leftover share of all resources."""
        if self.cap is not None and self.running >= self.cap:
            return None
        need = _need(res)
        if need in self._nofit:
            return None
        c, m, g = need
        best: dict[str, Instance] | None = None
        best_score = (0.0, 0.0)
        for key, bucket in self._index.items():
            fc, fm, fg, fs, cc, cm, cg = key
            if fs < 1 or fc < c or fm < m or fg < g:
                continue
            left_c, left_m = (fc - c) / cc, (fm - m) / cm
            left_g = (fg - g) / cg if cg else 0.0
            binding = left_c if c / cc >= m / cm else left_m
            if cg and g / cg > max(c / cc, m / cm):
                binding = left_g
            score = (binding, left_c + left_m + left_g)
            if best is None or score < best_score:
                best, best_score = bucket, score
        if best is None:
            self._nofit.add(need)
            return None
        return next(iter(best.values()))

    def hold(self, res: Resources, prefer: Instance | None = None) -> Instance | None:
        """Keep the instance closest to fitting ``res`` out of placement until
        :meth:`unhold`: ``prefer`` when it is offered and could ever fit ``res``, else the
        one with the most free of the task's binding resource (a task that must go next
        waits for room there, and smaller tasks cannot take it)."""
        c, m, g = _need(res)
        if prefer is not None and self._index.get(prefer.key(), {}).get(prefer.id) is prefer:
            s = prefer.spec
            if prefer.cap_mcpu >= c and s.memory_mb >= m and s.gpu >= g:
                self._index_drop(prefer)
                return prefer
        best: Instance | None = None
        best_score = -1.0
        for key, bucket in self._index.items():
            fc, fm, _, _, cc, cm, cg = key
            if cc < c or cm < m or cg < g:
                continue  # the task never fits on this shape
            score = fc / cc if c / cc >= m / cm else fm / cm
            if score > best_score:
                best, best_score = next(iter(bucket.values())), score
        if best is not None:
            self._index_drop(best)
        return best

    def unhold(self, inst: Instance) -> None:
        """Offer a held instance for placement again."""
        if inst.alive and inst.id in self.instances:
            self._index_add(inst)
        self._nofit.clear()  # needs refused while it was held may fit again

    def hopeless(self, needs: Iterable[Resources]) -> bool:
        """True when none of ``needs`` can fit now (known without a search)."""
        if self.cap is not None and self.running >= self.cap:
            return True
        return all(_need(r) in self._nofit for r in needs)

    def reserve(self, inst: Instance, spec: TaskSpec) -> None:
        c, m, g = _need(spec.resources)
        self._index_drop(inst)
        inst.mcpu -= c
        inst.memory_mb -= m
        inst.gpu -= g
        inst.slots -= 1
        inst.running[spec.id] = (c, m, g)
        self._index_add(inst)
        self.running += 1

    def release(self, inst: Instance, task_id: str, now: float = 0.0) -> bool:
        held = inst.running.pop(task_id, None)
        if held is None:
            return False
        c, m, g = held
        if inst.alive:
            self._index_drop(inst)
        inst.mcpu += c
        inst.memory_mb += m
        inst.gpu += g
        inst.slots += 1
        if not inst.running:
            inst.idle_since = now
        self._nofit.clear()
        if inst.alive:
            self._index_add(inst)
            self.running -= 1
        return True

    @property
    def free_slots(self) -> int:
        return self.total_slots - self.running

    # -- figures ---------------------------------------------------------------
    def free_mcpu(self) -> int:
        return sum(k[0] * len(b) for k, b in self._index.items() if k[3] >= 1)

    def total_mcpu(self) -> int:
        return sum(k[4] * len(b) for k, b in self._index.items())

    def stranded(self, needs: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
        """Per resource (CPU millicores, memory MB, GPUs): (free on instances where none
        of ``needs`` fits, all free, capacity)."""
        out = [[0, 0, 0], [0, 0, 0], [0, 0, 0]]
        for key, bucket in self._index.items():
            fc, fm, fg, fs, cc, cm, cg = key
            n = len(bucket)
            lost = fs < 1 or not any(fc >= c and fm >= m and fg >= g for c, m, g in needs)
            for row, free, cap in zip(out, (fc, fm, fg), (cc, cm, cg), strict=True):
                row[0] += free * n if lost else 0
                row[1] += free * n
                row[2] += cap * n
        return [(a, b, c) for a, b, c in out]


def fragmentation(regions: list[Region], needs: Iterable[Resources]) -> float:
    """Free room that no queued task fits, as a share of the fleet's capacity, in the
    resource the fleet has least of left (its bottleneck: CPU, memory or GPUs); 0 when
    nothing waits. An instance's free room counts as stranded when not one of the
    queued shapes fits there. Measured in the bottleneck because that is the room a
    waiting task lacks: with memory-heavy tasks memory runs out first, and the CPU left
    beside full memory is idle for want of memory, not because of how tasks were packed,
    while the few GB left on each of many instances are memory no queued task fits."""
    shapes = [_need(r) for r in needs]
    if not shapes:
        return 0.0
    rows = [[0, 0, 0], [0, 0, 0], [0, 0, 0]]
    for region in regions:
        for row, got in zip(rows, region.stranded(shapes), strict=True):
            for k in range(3):
                row[k] += got[k]
    used = [(1 - free / cap, k) for k, (_, free, cap) in enumerate(rows) if cap]
    if not used:
        return 0.0
    _, k = max(used)
    stranded, _, cap = rows[k]
    return stranded / cap

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
        """The instance where the task leaves the least capacity unused."""
        if self.cap is not None and self.running >= self.cap:
            return None
        need = _need(res)
        if need in self._nofit:
            return None
        c, m, g = need
        best: dict[str, Instance] | None = None
        best_score = 0.0
        for key, bucket in self._index.items():
            fc, fm, fg, fs, cc, cm, cg = key
            if fs < 1 or fc < c or fm < m or fg < g:
                continue
            score = (fc - c) / cc + (fm - m) / cm + ((fg - g) / cg if cg else 0.0)
            if best is None or score < best_score:
                best, best_score = bucket, score
        if best is None:
            self._nofit.add(need)
            return None
        return next(iter(best.values()))

    def most_free(self, res: Resources) -> Instance | None:
        """The fitting instance with the most capacity left after the task (spreading
        load, where best fit packs); None where best fit finds nothing."""
        if self.cap is not None and self.running >= self.cap:
            return None
        c, m, g = _need(res)
        best: dict[str, Instance] | None = None
        best_score = 0.0
        for key, bucket in self._index.items():
            fc, fm, fg, fs, cc, cm, _ = key
            if fs < 1 or fc < c or fm < m or fg < g:
                continue
            score = (fc - c) / cc + (fm - m) / cm
            if best is None or score > best_score:
                best, best_score = bucket, score
        return None if best is None else next(iter(best.values()))

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

    def unusable_mcpu(self, smallest: Resources) -> tuple[int, int]:
        """(free millicores the smallest task cannot use, all free millicores)."""
        c, m, g = _need(smallest)
        unusable = free = 0
        for key, bucket in self._index.items():
            fc, fm, fg, fs = key[:4]
            n = fc * len(bucket)
            free += n
            if fs < 1 or fc < c or fm < m or fg < g:
                unusable += n
        return unusable, free


def fragmentation(regions: list[Region], smallest: Resources | None) -> float:
    """Free CPU that the smallest queued task cannot use, over all free CPU (0..1)."""
    if smallest is None:
        return 0.0
    unusable = free = 0
    for region in regions:
        u, f = region.unusable_mcpu(smallest)
        unusable += u
        free += f
    return unusable / free if free else 0.0

"""The ``learned`` policy: an actor network picks which waiting task runs next.

Waiting tasks are kept in classes of the same type, run, priority and shape,
each in arrival order; within a class, tasks differ only in age, so the
candidates of a decision are the heads of the classes (at most
``max_classes``, the oldest heads first), each placed by best fit on its
binding resource (the network chooses what runs, never a placement that
leaves gaps). Every candidate becomes one row of
:data:`~megaflow.scheduler.learned_net.FEATURES` (priority, resource
efficiency, node load, predicted run time and others, each relative to the
other candidates so that the policy does not depend on a fleet's size or a
trace's time scale); the actor scores the rows and the best (or a sampled)
one is placed. A decision costs one pass over the classes and one small
matrix product, whatever the queue's length.

Whatever the network scores, no task starves: a wait bound
(:class:`~megaflow.scheduler.wait_bound.WaitBound`) places every task that
has waited beyond its fair share by a configured multiple of its expected run
time or of its wait until then, whichever is less, before the network is asked,
and lets only so many due tasks wait; those placements, the instances held for
due tasks that fit nowhere and the backfill on them are
:mod:`~megaflow.scheduler.learned_forced`'s.

Predicted run times come from the feedback hook: every placement that ends
``ok`` updates the mean run time of its (type, run) and of its type
(:class:`RunTimeEstimates`), so the policy adjusts to the cluster it runs on.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from megaflow.core.tasks import Resources, TaskSpec
from megaflow.scheduler.abstract import Decision, PendingTask, SchedulingPolicy, TaskFeedback
from megaflow.scheduler.learned_candidates import EXACT_UP_TO, ClassAges, WorkOrder
from megaflow.scheduler.learned_features import RunTimeEstimates, candidate_features
from megaflow.scheduler.learned_forced import ForcedPlacements, Queue
from megaflow.scheduler.learned_net import Checkpoint, read_checkpoint
from megaflow.scheduler.wait_bound import WaitBound

if TYPE_CHECKING:
    from megaflow.scheduler.config import LearnedPolicyConfig
    from megaflow.scheduler.fleet import Instance, Region
    from megaflow.scheduler.learned_net import Array

_Key = tuple[str, str, int, float, int, int]
"""A class of waiting tasks: type, run, priority, CPU, memory, GPU."""
Chooser = Callable[["Array", "Array"], int]
"""Picks one candidate: (candidate rows, critic state) -> row index."""
Recorder = Callable[[PendingTask, "Array", "Array", int, float, float], None]
"""Told each placed decision: (task, rows, state, row chosen, its probability, now)
(:class:`~megaflow.scheduler.decision_log.DecisionLog`)."""


def _key(spec: TaskSpec) -> _Key:
    r = spec.resources
    kind = spec.type.value if spec.type is not None else "untyped"
    return (kind, spec.run_id, spec.priority, r.cpu, r.memory_mb, r.gpu)


class LearnedPolicy(SchedulingPolicy):
    """Waiting tasks by class; an actor network places the class heads."""

    def __init__(
        self,
        net: Checkpoint | None,
        *,
        greedy: bool = True,
        seed: int = 0,
        max_classes: int = 32,
        chooser: Chooser | None = None,
        wait_bound: float | None = 1.0,
        wait_floor_s: float = 60.0,
        wait_backlog: float | None = 1.0,
        backfill: bool = True,
        wait_order: Literal["arrival", "deadline"] = "arrival",
    ) -> None:
        """``wait_bound``: a waiting task is placed ahead of the network's choice once it
        has waited this many expected run times (at least ``wait_floor_s``) beyond the
        point where ``fair`` would have started it, at most ``wait_backlog`` due tasks per
        instance wait (:class:`WaitBound`); None turns either off (the config sets both)."""
        super().__init__()
        self.net = net
        self.greedy = greedy
        self.rng = random.Random(seed)
        self.max_classes = max_classes
        self.chooser: Chooser = chooser or self.choose
        self.record: Recorder | None = None
        self.estimates = RunTimeEstimates()
        self._classes: dict[_Key, list[tuple[int, int, PendingTask]]] = {}
        self._token: dict[str, int] = {}
        self._tokens = 0
        self._resources: dict[tuple[float, int, int], Resources] = {}
        self._observed = 0
        self._shapes: Counter[tuple[float, int, int]] = Counter()
        """Waiting tasks by shape (entries still in a class heap, stale ones included)."""
        self._ages = ClassAges(self._classes, self._head)
        self._work_order = WorkOrder(
            self._classes, self._head, self.class_work, lambda: self._observed
        )
        bound = None
        if wait_bound is not None:
            predict, waiting = self.estimates.predict, self._waiting
            bound = WaitBound(wait_bound, wait_floor_s, predict, waiting, backlog=wait_backlog,
                              order=wait_order)  # fmt: skip
        queue = Queue(lambda t: _key(t.spec), self._head, self._classes.__contains__,
                      lambda: self._heads(set()), self._take, self._place)  # fmt: skip
        self.forcing = ForcedPlacements(queue, bound, backfill)
        """The wait bound's placements, holds and backfill, and their counts."""

    @property
    def bound(self) -> WaitBound | None:
        return self.forcing.bound

    @property
    def forced(self) -> int:
        """Placements made by the wait bound instead of the network."""
        return self.forcing.forced

    # -- the queue ---------------------------------------------------------------------
    def push(self, task: PendingTask) -> None:
        self._tokens += 1
        self._token[task.id] = self._tokens
        key = _key(task.spec)
        heap = self._classes.get(key)
        if heap is None:
            heap = self._classes[key] = []
            self._work_order.fresh.append(key)
        heapq.heappush(heap, (task.seq, self._tokens, task))
        self._shapes[key[3:]] += 1
        if heap[0][2] is task:
            self._ages.moved(key, task.seq)
        self.forcing.arrived(task)

    def _waiting(self, task: PendingTask) -> bool:
        return task.id in self._token and not task.removed

    def _head(self, key: _Key) -> PendingTask | None:
        heap = self._classes[key]
        moved = False
        while heap:
            _, tok, task = heap[0]
            if self._token.get(task.id) == tok and not task.removed:
                if moved:
                    self._ages.moved(key, task.seq)
                return task
            heapq.heappop(heap)
            self._shapes[key[3:]] -= 1
            moved = True
            if task.removed and self._token.get(task.id) == tok:
                del self._token[task.id]
                self.forcing.dropped(task.id)
        del self._classes[key]
        return None

    def _take(self, key: _Key) -> PendingTask:
        heap = self._classes[key]
        task = heapq.heappop(heap)[2]
        self._shapes[key[3:]] -= 1
        del self._token[task.id]
        if heap:
            self._ages.moved(key, heap[0][0])
        return task

    def _heads(self, blocked: set[_Key]) -> list[tuple[_Key, PendingTask]]:
        if len(self._classes) > EXACT_UP_TO:
            half = self.max_classes // 2
            oldest = self._ages.oldest(half, blocked)
            skip = blocked | {k for k, _ in oldest}
            return oldest + self._work_order.least(self.max_classes - half, skip)
        out = []
        for key in list(self._classes):
            if key in blocked:
                continue
            task = self._head(key)
            if task is not None:
                out.append((key, task))
        if len(out) > self.max_classes:
            # Prefilter by cheap keys: the oldest heads (nothing waits for ever) and
            # the heads of the least predicted work (short jobs first pays most).
            half = self.max_classes // 2
            oldest = heapq.nsmallest(half, out, key=lambda kt: kt[1].seq)
            taken = {k for k, _ in oldest}
            rest = [kt for kt in out if kt[0] not in taken]
            n = self.max_classes - half
            out = oldest + heapq.nsmallest(n, rest, key=lambda kt: self.class_work(kt[0]))
        return out

    def class_work(self, key: _Key) -> float:
        """CPU x predicted run time of a class; 0 before any estimate (so it is tried)."""
        pred = self.estimates.predict_for(key[0], key[1])
        return key[3] * (0.0 if pred is None else pred)

    def pop(self) -> PendingTask | None:
        """The oldest waiting task (preemption asks the queue in this order)."""
        heads = self._heads(set())
        if not heads:
            return None
        key, _ = min(heads, key=lambda kt: kt[1].seq)
        return self._take(key)

    def observe(self, feedback: TaskFeedback) -> None:
        self.forcing.ended(feedback.task.id)
        self.estimates.observe(feedback)
        self._observed += 1

    # -- decisions ---------------------------------------------------------------------
    def choose(self, rows: Array, state: Array) -> int:
        """The network's pick: the best row, or one sampled from the softmax."""
        if self.net is None:
            raise ValueError("a learned policy without a network needs a chooser")
        logits = self.net.logits(rows)
        if self.greedy:
            return int(logits.argmax())
        z = [math.exp(v - float(logits.max())) for v in logits.tolist()]
        return self.rng.choices(range(len(z)), weights=z)[0]

    def probability(self, rows: Array, chosen: int) -> float:
        """The chance of row ``chosen`` under the network's softmax (1 when greedy)."""
        if self.greedy or self.net is None:
            return 1.0
        logits = self.net.logits(rows).astype("float64")
        z = [math.exp(v - float(logits.max())) for v in logits.tolist()]
        return z[chosen] / sum(z)

    def decide(
        self, region: Region, admit: Callable[[PendingTask, Instance], bool], limit: int,
        scan_limit: int,
    ) -> list[Decision]:  # fmt: skip
        """Up to ``limit`` placements: first every overdue task the wait bound names
        (the oldest first, by best fit), then one network decision each.
        ``scan_limit`` is not needed: only class heads are candidates, and a class that
        does not fit or is refused by admission is left out for the rest of the round."""
        out: list[Decision] = []
        blocked: set[_Key] = set()
        forcing = self.forcing
        held = forcing.begin(self.now)
        try:
            forcing.overdue(region, admit, limit, out, blocked, held, self.now)
            while len(out) < limit:
                actions = self._actions(region, blocked)
                if not actions:
                    break
                rows, state = self.features(actions, region)
                chosen = self.chooser(rows, state)
                key, task, inst, _ = actions[chosen]
                if not admit(task, inst):
                    blocked.add(key)
                    continue
                self._take(key)
                if self.record is not None:
                    p = self.probability(rows, chosen)
                    self.record(task, rows, state, chosen, p, self.now)
                self._place(region, task, inst, out)
            forcing.backfill_held(region, admit, limit, out, held)
        finally:
            forcing.end(region, held, self.now)
        return out

    def _place(
        self, region: Region, task: PendingTask, inst: Instance, out: list[Decision]
    ) -> None:
        region.reserve(inst, task.spec)
        out.append(Decision(task, inst))
        self.forcing.placed(task, self.now)

    def _actions(
        self, region: Region, blocked: set[_Key]
    ) -> list[tuple[_Key, PendingTask, Instance, bool]]:
        """The candidates that fit somewhere; when none of the prefiltered heads fits,
        the next ones are tried, so free room is never left for want of a candidate."""
        fits: dict[tuple[float, int, int], Instance | None] = {}
        while True:
            heads = self._heads(blocked)
            if not heads:
                return []
            actions = self._placements(region, heads, blocked, fits)
            if actions:
                return actions
            if all(shape in fits and fits[shape] is None for shape, n in self._shapes.items() if n):
                return []  # no waiting shape fits anywhere: no need to look further

    def _placements(
        self, region: Region, heads: list[tuple[_Key, PendingTask]], blocked: set[_Key],
        fits: dict[tuple[float, int, int], Instance | None],
    ) -> list[tuple[_Key, PendingTask, Instance, bool]]:  # fmt: skip
        """Each head with its best fit by the binding resource. Spreading (the emptiest
        instance) is no longer offered: it left gaps that large tasks could not use."""
        actions = []
        for key, task in heads:
            shape = key[3:]
            if shape in fits:
                pack = fits[shape]
            else:
                res = self._resources.get(shape)
                if res is None:
                    res = self._resources[shape] = Resources.model_construct(
                        cpu=shape[0], memory_mb=shape[1], gpu=shape[2]
                    )
                pack = fits[shape] = region.best_fit(res)
            if pack is None:
                blocked.add(key)  # capacity only shrinks within a round
                continue
            actions.append((key, task, pack, False))
        return actions

    def features(
        self, actions: list[tuple[_Key, PendingTask, Instance, bool]], region: Region
    ) -> tuple[Array, Array]:
        """One row per candidate (:data:`FEATURES`), and the critic's state vector."""
        preds = [self.estimates.predict(t.spec) for _, t, _, _ in actions]
        rows = [
            (k[2], k[3], self.now - t.enqueued_at, p, i.mcpu, i.cap_mcpu, len(self._classes[k]),
             spread)
            for (k, t, i, spread), p in zip(actions, preds, strict=True)
        ]  # fmt: skip
        return candidate_features(rows, region, max(1, len(self._token)))


def learned_factory(cfg: LearnedPolicyConfig) -> Callable[[], SchedulingPolicy]:
    """Reads the checkpoint once; every queue gets its own policy over the same weights."""
    net = read_checkpoint(cfg.checkpoint)

    def make(**_: Any) -> SchedulingPolicy:
        return LearnedPolicy(net, greedy=cfg.greedy, seed=cfg.seed, wait_bound=cfg.wait_bound,
                             wait_floor_s=cfg.wait_floor_s,
                             wait_backlog=cfg.wait_backlog, backfill=cfg.wait_backfill,
                             wait_order=cfg.wait_order)  # fmt: skip

    return make

"""What the wait bound places for the ``learned`` policy, outside its network.

:class:`~megaflow.scheduler.wait_bound.WaitBound` says which tasks are due and
which are past their deadlines; this module turns that into placements in a
planning round of :class:`~megaflow.scheduler.learned.LearnedPolicy`:

- before the network is asked, every overdue task (and, beyond the backlog
  limit, the earliest due ones) is placed by best fit, the oldest first (or the
  earliest deadline first, ``wait_order: deadline``);
  one that fits nowhere gets an instance held for it for the rest of the round
  (the one held for it the round before, while no earlier deadline holds it),
  so that the room freed there is its, not a newer task's; then the tasks past
  their soft (``fifo``) deadline that fit somewhere, holding nothing;
- after the network's choices, each held instance takes backfill: the oldest
  class heads that leave the held task its room
  (:class:`~megaflow.scheduler.wait_bound.Backfill`).

The policy's queue of classes is reached through the callables it passes in
(:class:`Queue`), so this module knows nothing of how classes are kept.
Forced and backfilled placements are not the network's decisions: they are
counted apart (:attr:`ForcedPlacements.forced`) and neither recorded nor
learned from.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from megaflow.core.tasks import Resources
from megaflow.scheduler.abstract import Admit, Decision, PendingTask
from megaflow.scheduler.wait_bound import Backfill, WaitBound

if TYPE_CHECKING:
    from megaflow.scheduler.fleet import Instance, Region

K = TypeVar("K", bound=Hashable)
Held = tuple["Instance", Resources, float]
"""An instance held this round: for a task needing these resources, held for it since."""
Place = Callable[["Region", PendingTask, "Instance", list[Decision]], None]


@dataclass(frozen=True, slots=True)
class Queue(Generic[K]):
    """The policy's waiting classes, as the forced placements use them."""

    class_of: Callable[[PendingTask], K]
    head: Callable[[K], PendingTask | None]
    """The head of a waiting class (None when the class has emptied)."""
    waiting: Callable[[K], bool]
    """Whether a class with this key is kept (it may still have emptied)."""
    heads: Callable[[], list[tuple[K, PendingTask]]]
    """The candidate class heads (the prefilter's, when many classes wait)."""
    take: Callable[[K], PendingTask]
    place: Place
    """Reserve the instance and note the placement (the policy's own bookkeeping)."""


class ForcedPlacements(Generic[K]):
    """The wait bound's placements, holds and backfill in each planning round."""

    def __init__(self, queue: Queue[K], bound: WaitBound | None, backfill: bool) -> None:
        self.queue = queue
        self.bound = bound
        self.backfill = Backfill() if backfill else None
        self.forced = 0
        """Placements made by the wait bound instead of the network."""
        self.backfilled = 0
        """Placements on held instances that leave room for the task held for (in
        ``forced`` too: not the network's decisions either)."""
        self._held_on: dict[str, tuple[str, float]] = {}
        """The instance last held for each waiting task (held for it again first), and
        since when."""
        self.holds = 0
        """Instances held, summed over planning rounds."""
        self.holds_early = 0
        """Of them, for a task whose deadline had not passed (the backlog limit's)."""
        self.held_s = 0.0
        """Instance-seconds held: each round's holds until the next round."""
        self._last_round = (0.0, 0)

    # -- bookkeeping the policy forwards -----------------------------------------------
    def arrived(self, task: PendingTask) -> None:
        if self.bound is not None:
            self.bound.arrived(task)

    def placed(self, task: PendingTask, now: float) -> None:
        """Any placement, the network's or a forced one."""
        self._held_on.pop(task.id, None)
        if self.backfill is not None:
            self.backfill.placed(task.id, now)
        if self.bound is not None:
            self.bound.placed(task)
            self.bound.started(now)

    def dropped(self, task_id: str) -> None:
        """A waiting task was cancelled."""
        self._held_on.pop(task_id, None)

    def ended(self, task_id: str) -> None:
        if self.backfill is not None:
            self.backfill.ended(task_id)

    # -- a planning round --------------------------------------------------------------
    def begin(self, now: float) -> list[Held]:
        """A round starts: the last round's holds count until now. Returns the list the
        round's holds go in (give it to :meth:`end`)."""
        at, n = self._last_round
        self.held_s += n * (now - at)
        return []

    def end(self, region: Region, held: list[Held], now: float) -> None:
        """The round is over: every instance held in it is offered for placement again."""
        for inst, _, _ in held:
            region.unhold(inst)
        self._last_round = (now, len(held))

    def overdue(
        self, region: Region, admit: Admit, limit: int, out: list[Decision], blocked: set[K],
        held: list[Held], now: float,
    ) -> None:  # fmt: skip
        """Place the overdue tasks (and, beyond the backlog limit, the earliest due ones)
        in the bound's order (:meth:`WaitBound.take_overdue`); within a class the head
        goes (tasks become due in arrival order). One that fits nowhere gets the instance
        closest to fitting it held for the rest of the round, so the room freed there is
        its, not a newer task's. Then the tasks past their soft (fifo) deadline that fit,
        holding nothing. Each looks at up to ``limit + 64`` tasks a round."""
        bound = self.bound
        if bound is None:
            return
        most = bound.most_due(len(region.instances))
        later = self._force(region, admit, limit, out, blocked, held, now,
                            lambda: bound.take_overdue(now, most))  # fmt: skip
        bound.put_back(later)
        later = self._force(region, admit, limit, out, blocked, None, now,
                            lambda: bound.take_soft(now))  # fmt: skip
        bound.put_back_soft(later)

    def _force(
        self, region: Region, admit: Admit, limit: int, out: list[Decision], blocked: set[K],
        held: list[Held] | None, now: float, take: Callable[[], PendingTask | None],
    ) -> list[PendingTask]:  # fmt: skip
        """Place what ``take`` names while it fits (holding an instance for one that does
        not when ``held`` is given); returns the tasks taken and not placed."""
        q = self.queue
        later: list[PendingTask] = []
        looked = 0
        while len(out) < limit and looked < limit + 64:
            task = take()
            if task is None:
                break
            looked += 1
            later.append(task)
            key = q.class_of(task)
            head = q.head(key) if q.waiting(key) and key not in blocked else None
            inst = None if head is None else region.best_fit(head.spec.resources)
            if head is None or inst is None or not admit(head, inst):
                blocked.add(key)
                if inst is None and held is not None:
                    self._hold(region, task, held, now)
                continue
            later.pop()
            if head is not task:
                later.append(task)
            q.take(key)
            self.forced += 1
            q.place(region, head, inst, out)
        return later

    def _hold(self, region: Region, task: PendingTask, held: list[Held], now: float) -> None:
        """Hold an instance for ``task`` for the rest of the round: the one held for it
        the round before when that is still free to hold."""
        was_id, since = self._held_on.get(task.id, ("", now))
        got = region.hold(task.spec.resources, region.instances.get(was_id))
        if got is None:
            return
        since = since if got.id == was_id else now
        held.append((got, task.spec.resources, since))
        self._held_on[task.id] = (got.id, since)
        self.holds += 1
        due = self.bound.due.get(task.id) if self.bound is not None else None
        self.holds_early += due is not None and due.deadline > now

    def backfill_held(
        self, region: Region, admit: Admit, limit: int, out: list[Decision], held: list[Held],
    ) -> None:  # fmt: skip
        """On each held instance, the oldest class heads that leave room there for the
        task it is held for, with every task placed there since the hold began still
        running (:class:`Backfill`). The round's last step: a placement puts the instance
        back in the index."""
        backfill = self.backfill
        if backfill is None:
            return
        q = self.queue
        heads: list[tuple[K, PendingTask]] | None = None
        for inst, need, since in held:
            while len(out) < limit and inst.slots > 0:
                if heads is None:  # once a round, and again after each placement
                    heads = sorted(q.heads(), key=lambda kt: kt[1].seq)
                for key, task in heads:
                    if backfill.fits(inst, need, since, task.spec.resources) and admit(task, inst):
                        q.take(key)
                        self.backfilled += 1
                        self.forced += 1
                        q.place(region, task, inst, out)
                        heads = None
                        break
                else:
                    break

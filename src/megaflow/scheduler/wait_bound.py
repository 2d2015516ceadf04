"""A bound on every queued task's wait, enforced outside any learned network.

The ``learned`` policy orders tasks by what its network scores; a network that
learned "short work first" can leave a long task behind every burst for hours.
:class:`WaitBound` makes that impossible whatever the network scores:

1. **The fair share.** A shadow of the ``fair`` policy (deficit round robin
   over runs, :class:`~megaflow.scheduler.policies.FairPolicy`) receives every
   task that arrives. Each time the real queue starts a task, the shadow takes
   its next task: after ``k`` starts, the shadow has taken the ``k`` tasks that
   ``fair`` would have started with the same ``k`` starts. A task the shadow
   takes while it still waits in the real queue is *due*: under ``fair`` it
   would be running by now.
2. **The bound.** A due task's deadline is the time it became due plus
   ``multiple`` times the lesser of its expected run time (the policy's
   estimate when it became due) and how long it had waited by then, and at
   least ``floor_s`` (``floor_s`` alone before any estimate). The slack
   follows the waits, not only the run times: on a large fleet tasks wait
   seconds to minutes for runs of many minutes, and a slack of one run time let
   the network double the longest wait without the bound ever acting.
3. **Enforcement.** Before the network chooses, every overdue task (deadline
   passed, still waiting) is placed by best fit, the oldest first (``order=
   "arrival"``; ``"deadline"``: earliest deadline first). Since a deadline
   grows with the wait before the task became due, earliest deadline first let
   tasks due soon after arriving take the room ahead of older ones: on a
   memory-skewed fleet the longest waits (8-14 GB tasks held for room) came to
   17% above fifo's, oldest first to 4% below (ten traces). One that fits
   nowhere gets an instance held for it until it fits (the one held
   for it before while that is free to hold), so smaller tasks cannot keep
   taking its room. A held instance is not left idle: it still takes waiting
   tasks that leave the held task its room with everything placed there since
   the hold began still running (:class:`Backfill`). Held empty of new work,
   instances on a memory-skewed fleet (8-14 GB tasks on 32 GB instances) sat
   held for 34-41% of the fleet's instance-seconds with room for small tasks,
   and the average JCT came to 1.6-1.8 times fifo's.
4. **A limited backlog.** Every task the network starts ahead of its fair
   share leaves one more task due. Were due tasks let pile up, they would
   reach their deadlines together and wait behind each other past them (on a
   burst trace, 883 s past). So at most ``backlog`` due tasks per instance
   wait: beyond that, the earliest deadline is placed before it passes.
5. **Arrival order, where it fits.** A second shadow, of ``fifo``, takes its
   next task at each start too; a task it takes while it still waits (and is
   not due) gets a *soft* deadline, with the same slack. Past it, the task is
   placed before the network chooses when it fits somewhere, after the
   overdue ones; it holds no instance and does not count in the backlog.
   Where ``fifo`` keeps the longest wait shorter than ``fair`` (fair's turns
   hold back a run with many tasks), this keeps the network from stretching
   it; it promises nothing (the bound is items 1-4).

What holds (``tests/sim/test_wait_bound.py``, on burst, memory-skewed and
large-fleet traces, in either order), without backfilling (``backfill=False``): a due task
starts by its deadline, or, when no instance has room for it then, no later
than the moment the tasks running at its deadline on the instance it gets
have ended. So a task that ``fair`` would have started after it waited ``w``
starts within ``max(floor_s, multiple x w)`` of that (and never later than
``max(floor_s, multiple x`` its expected run time ``)``), or, where there is
no room then, once the tasks running then on its instance end. With
backfilling (the default) a backfilled task never takes the room of the task
its instance is held for, but the room freed there can go first to an older
overdue task, and with small work on the held instances there are more such
tasks waiting: with a slack of 600 s, due tasks then started up to 883 s
(memory-skewed trace) and 884 s (burst trace) past the bound above (986 and
770 s earliest deadline first), and the tests hold it to twice the slack. The
shadows cost two heap pushes per arrival and two pops per start, and a task past
its deadline one more push and pop when the order is by arrival.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from megaflow.core.tasks import Resources, TaskSpec
from megaflow.scheduler.abstract import PendingTask
from megaflow.scheduler.fleet import Instance
from megaflow.scheduler.policies import FairPolicy, FifoPolicy


@dataclass(frozen=True, slots=True)
class Due:
    """When a task became due under the fair shadow, and its deadline."""

    at: float
    deadline: float


class WaitBound:
    """Deadlines from a fair shadow queue (and soft ones from a fifo shadow); the overdue
    tasks, oldest (or earliest deadline) first."""

    def __init__(
        self,
        multiple: float,
        floor_s: float,
        expected: Callable[[TaskSpec], float | None],
        waiting: Callable[[PendingTask], bool],
        fair_key: str = "run",
        backlog: float | None = 1.0,
        order: Literal["arrival", "deadline"] = "arrival",
    ) -> None:
        """``expected(spec)`` is the expected run time (None when unknown);
        ``waiting(task)`` says whether the task still waits in the real queue;
        ``backlog``: at most this many due tasks per instance wait (None: no limit);
        ``order``: which task past its deadline goes first, the oldest or the one with
        the earliest deadline (:meth:`take_overdue`)."""
        if multiple <= 0 or floor_s < 0 or (backlog is not None and backlog <= 0):
            raise ValueError(f"a wait bound needs multiple > 0, floor_s >= 0 and backlog > 0, "
                             f"got {multiple}, {floor_s} and {backlog}")  # fmt: skip
        self.backlog = backlog
        self.order = order
        self.multiple = multiple
        self.floor_s = floor_s
        self._expected = expected
        self._waiting = waiting
        self._shadow = FairPolicy(key=fair_key)
        self._fifo = FifoPolicy()
        self._heap: list[tuple[float, int, PendingTask]] = []
        self._passed: list[tuple[int, PendingTask]] = []
        """With ``order="arrival"``: due tasks whose deadline has passed, by arrival."""
        self._now = -math.inf
        """The time of the last :meth:`take_overdue`."""
        self._soft_heap: list[tuple[float, int, PendingTask]] = []
        self.due: dict[str, Due] = {}
        """Waiting tasks that are due, by id (dropped once placed)."""
        self.soft: dict[str, float] = {}
        """Soft deadlines of waiting tasks the fifo shadow took, by id (dropped once
        placed or due)."""

    def arrived(self, task: PendingTask) -> None:
        self._shadow.push(task)
        self._fifo.push(task)

    def started(self, now: float) -> None:
        """One task started in the real queue: ``fair`` and ``fifo`` would each have
        started their next."""
        task = self._next(self._shadow)
        if task is not None and task.id not in self.due:
            due = self.due[task.id] = Due(now, now + self.slack(task, now))
            heapq.heappush(self._heap, (due.deadline, task.seq, task))
            self.soft.pop(task.id, None)
        task = self._next(self._fifo)
        if task is not None and task.id not in self.due and task.id not in self.soft:
            deadline = self.soft[task.id] = now + self.slack(task, now)
            heapq.heappush(self._soft_heap, (deadline, task.seq, task))

    def _next(self, shadow: FairPolicy | FifoPolicy) -> PendingTask | None:
        """The shadow's next task, if it still waits in the real queue."""
        while True:
            task = shadow.pop()
            if task is None or not task.removed:  # cancelled: no shadow starts it either
                return task if task is not None and self._waiting(task) else None

    def slack(self, task: PendingTask, now: float) -> float:
        """``multiple`` x the lesser of the expected run time and the wait so far, at
        least ``floor_s`` (``floor_s`` before any estimate)."""
        pred = self._expected(task.spec)
        if pred is None:
            return self.floor_s
        return max(self.floor_s, self.multiple * min(pred, now - task.enqueued_at))

    def most_due(self, instances: int) -> int | None:
        """How many due tasks may wait on a fleet of ``instances`` (None: any number)."""
        if self.backlog is None:
            return None
        return math.ceil(self.backlog * max(1, instances))

    def placed(self, task: PendingTask) -> None:
        self.due.pop(task.id, None)
        self.soft.pop(task.id, None)

    def take_overdue(self, now: float, most_due: int | None = None) -> PendingTask | None:
        """The next overdue waiting task, taken out of the overdue order
        (:meth:`put_back` returns one that could not be placed yet): of the tasks past
        their deadline, the oldest (``order="arrival"``) or the earliest deadline
        (``"deadline"``). While more than ``most_due`` tasks are due and none is past its
        deadline, the earliest deadline goes even though it has not passed yet: the
        backlog of due tasks is what makes a deadline unreachable."""
        if most_due is None:
            most_due = len(self.due)
        self._now = now
        heap = self._heap
        while heap:
            deadline, _, task = heap[0]
            if not self._live(task):
                heapq.heappop(heap)  # placed or cancelled since
                continue
            if self.order == "deadline" or deadline > now:
                break
            heapq.heappop(heap)
            heapq.heappush(self._passed, (task.seq, task))
        while self._passed:
            task = heapq.heappop(self._passed)[1]
            if self._live(task):
                return task
        if not heap or (heap[0][0] > now and len(self.due) <= most_due):
            return None
        return heapq.heappop(heap)[2]

    def _live(self, task: PendingTask) -> bool:
        """Still waiting and due (else dropped from ``due``)."""
        if self._waiting(task) and task.id in self.due:
            return True
        self.due.pop(task.id, None)
        return False

    def take_soft(self, now: float) -> PendingTask | None:
        """The waiting task with the earliest passed soft deadline, taken out of that
        order (:meth:`put_back_soft` returns one that could not be placed)."""
        heap = self._soft_heap
        while heap:
            deadline, _, task = heap[0]
            if not self._waiting(task) or task.id not in self.soft:
                heapq.heappop(heap)  # placed, cancelled or due since
                self.soft.pop(task.id, None)
                continue
            if deadline > now:
                return None
            heapq.heappop(heap)
            return task
        return None

    def put_back(self, tasks: list[PendingTask]) -> None:
        for task in tasks:
            due = self.due.get(task.id)
            if due is None:
                continue
            if self.order == "arrival" and due.deadline <= self._now:
                heapq.heappush(self._passed, (task.seq, task))  # passed: stays in age order
            else:
                heapq.heappush(self._heap, (due.deadline, task.seq, task))

    def put_back_soft(self, tasks: list[PendingTask]) -> None:
        for task in tasks:
            deadline = self.soft.get(task.id)
            if deadline is not None:
                heapq.heappush(self._soft_heap, (deadline, task.seq, task))


class Backfill:
    """What may go on an instance held for a task, beside what runs there.

    A held instance keeps running what it ran when the hold began; the room the held
    task needs frees as those tasks end. Another task may still go there when, with it
    and every task placed there since the hold began still running, the instance's
    capacity leaves room for the held task: once the tasks that ran there when the hold
    began have ended, the held task fits, whatever the others do (backfilling, as EASY
    backfilling does for a reserved job, but needing no run-time estimate). So a held
    instance runs small work instead of idling while the room for a big task frees."""

    def __init__(self) -> None:
        self._placed_at: dict[str, float] = {}

    def placed(self, task_id: str, now: float) -> None:
        self._placed_at[task_id] = now

    def ended(self, task_id: str) -> None:
        self._placed_at.pop(task_id, None)

    def fits(self, inst: Instance, held_for: Resources, since: float, res: Resources) -> bool:
        """Whether a task needing ``res`` may go on ``inst``, held for ``held_for`` from
        ``since``: it fits now, and the capacity minus it and the tasks placed there
        from ``since`` on leaves room for ``held_for``."""
        if not inst.fits(res):
            return False
        at = self._placed_at
        new = [r for tid, r in inst.running.items() if at.get(tid, -math.inf) >= since]
        spec = inst.spec
        left = (
            inst.cap_mcpu - sum(r[0] for r in new) - round(res.cpu * 1000),
            spec.memory_mb - sum(r[1] for r in new) - res.memory_mb,
            spec.gpu - sum(r[2] for r in new) - res.gpu,
            spec.slots - len(new) - 1,
        )
        need = (round(held_for.cpu * 1000), held_for.memory_mb, held_for.gpu, 1)
        return all(x >= n for x, n in zip(left, need, strict=True))

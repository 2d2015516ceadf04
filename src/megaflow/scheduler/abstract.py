"""The scheduler's boundaries: what it calls, and what plugs into it.

- :class:`TaskExecutor` runs one attempt of a task. The app layer implements
  it (sandbox + agent + grading); the scheduler ships a no-op, a sleeping and
  a fault-injecting executor (:mod:`megaflow.scheduler.synthetic`).
- :class:`SchedulingPolicy` orders the waiting tasks and turns them into
  (task, placement) decisions against the fleet of instances.
- :class:`FleetProvider` adds and removes instances for the autoscaler.
- :class:`TaskFeedback` is how one placement ended, as the dispatch core
  tells the policy that made it (:meth:`SchedulingPolicy.observe`).

Outcome of an attempt, as the dispatcher reads it: a returned
:class:`~megaflow.core.tasks.TaskResult` is ``SUCCEEDED``; ``InfraError`` is
retried with backoff up to ``max_attempts``; ``AgentError`` is ``FAILED``;
``TimeoutError`` is ``TIMED_OUT``; cancellation is ``CANCELLED``. None of the
last three is retried.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from megaflow.core.states import TaskState
from megaflow.core.tasks import Outcome, Resources, TaskResult, TaskSpec

if TYPE_CHECKING:
    from megaflow.scheduler.fleet import Instance, Region

STAGES = (TaskState.STARTING, TaskState.RUNNING, TaskState.GRADING)


@dataclass(slots=True)
class TaskContext:
    """What an executor gets for one attempt, and how it reports progress."""

    spec: TaskSpec
    attempt: int
    instance: str
    region: str
    _report: Callable[[TaskState], None] = field(repr=False)

    def stage(self, state: TaskState) -> None:
        """Report a stage change: STARTING (sandbox), RUNNING (agent), GRADING."""
        if state not in STAGES:
            raise ValueError(f"an executor reports only {[s.value for s in STAGES]}, not {state}")
        self._report(state)


class TaskExecutor(abc.ABC):
    """Runs one attempt of a task. Cancellation arrives as ``asyncio.CancelledError``;
    the executor must release its sandbox before letting it propagate."""

    async def start(self) -> None:  # noqa: B027 - optional hook
        """Acquire shared resources (pools, clients)."""

    async def stop(self) -> None:  # noqa: B027 - optional hook
        """Release everything ``start`` acquired."""

    @abc.abstractmethod
    async def run(self, ctx: TaskContext) -> TaskResult: ...


@dataclass(slots=True, eq=False)
class PendingTask:
    """A task waiting in the dispatcher. ``enqueued_at`` is its first arrival."""

    spec: TaskSpec
    seq: int
    enqueued_at: float
    removed: bool = False
    preemptions: int = 0
    """How often a placement of this task was preempted so far."""

    @property
    def id(self) -> str:
        return self.spec.id


@dataclass(frozen=True, slots=True)
class TaskFeedback:
    """How one placement of a task ended: given once per placement, when its slot
    is released (finished, failed, preempted, cancelled, or its instance lost)."""

    task: PendingTask
    outcome: Outcome
    instance: str
    placed_at: float
    ended_at: float

    @property
    def wait_s(self) -> float:
        """From the task's first arrival to this placement."""
        return self.placed_at - self.task.enqueued_at

    @property
    def run_s(self) -> float:
        """How long this placement held its slot."""
        return self.ended_at - self.placed_at

    @property
    def resources(self) -> Resources:
        return self.task.spec.resources


@dataclass(slots=True)
class Decision:
    """Run ``task`` on ``instance``, first preempting the tasks in ``preempt``."""

    task: PendingTask
    instance: Instance
    preempt: Sequence[str] = ()
    """Ids of running tasks to stop first; a shared empty tuple when none (the
    usual case), so a decision allocates no list."""


Admit = Callable[[PendingTask, "Instance"], bool]


class SchedulingPolicy(abc.ABC):
    """Orders waiting tasks. Subclasses implement ``push``/``pop``; ``decide``
    walks that order and places each task by best fit.

    ``options`` are the ``options`` of a custom policy's config. ``now`` is the
    time of the round being decided (set by the dispatch core before ``decide``).
    """

    now: float = 0.0

    def __init__(self, **options: Any) -> None:
        self.options = options

    @abc.abstractmethod
    def push(self, task: PendingTask) -> None:
        """Add a waiting task."""

    @abc.abstractmethod
    def pop(self) -> PendingTask | None:
        """Take the task that should run next, or None when empty."""

    def push_back(self, tasks: list[PendingTask]) -> None:
        """Return tasks popped this round but not placed; their order is kept."""
        for task in tasks:
            self.push(task)

    def priority_of(self, spec: TaskSpec) -> float:
        """The priority preemption compares (higher wins)."""
        return float(spec.priority)

    def observe(self, feedback: TaskFeedback) -> None:  # noqa: B027 - optional hook
        """How a task this policy placed ended; a learning policy adjusts on it."""

    def decide(self, region: Region, admit: Admit, limit: int, scan_limit: int) -> list[Decision]:
        """Up to ``limit`` decisions; gives up after ``scan_limit`` tasks that do not fit."""
        out: list[Decision] = []
        missed: list[PendingTask] = []
        while len(out) < limit and len(missed) < scan_limit:
            task = self.pop()
            if task is None:
                break
            if task.removed:
                continue
            inst = region.best_fit(task.spec.resources)
            if inst is None or not admit(task, inst):
                missed.append(task)
                continue
            region.reserve(inst, task.spec)
            out.append(Decision(task, inst))
        self.push_back(missed)
        return out


@dataclass(frozen=True, slots=True)
class InstanceSpec:
    """An instance's identity and capacity, as a fleet provider hands it over."""

    id: str
    region: str = "default"
    cpu: float = 1.0
    memory_mb: int = 1024
    gpu: int = 0
    slots: int = 1
    """Tasks the instance runs at once, whatever their size."""


class FleetProvider(abc.ABC):
    """Adds and removes instances; the autoscaler decides when."""

    @abc.abstractmethod
    async def scale_up(self, n: int) -> list[InstanceSpec]:
        """Ask for ``n`` more instances; returns those that were granted."""

    @abc.abstractmethod
    async def scale_down(self, ids: list[str]) -> None:
        """Release the given (idle) instances."""

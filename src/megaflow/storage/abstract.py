"""The three storage interfaces: metadata, queue + events, artifacts.

Data is kept apart as the design asks: small, transactional metadata (runs,
tasks, attempts, results) in a :class:`MetadataStore`; the work queue and
the event stream in a :class:`TaskQueue` and an :class:`EventBus`; bulky
outputs (trajectories, patches, logs) in an :class:`ArtifactStore`. Each has
an embedded implementation (SQLite, in-process, local files) and production
ones chosen by config.

All methods are ``async`` so the same scheduler code runs over an embedded
store and a networked one. Every store has an explicit lifecycle:
``await store.start()`` / ``await store.stop()`` or ``async with store``.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from megaflow.core.errors import AlreadyExists
from megaflow.core.events import Event
from megaflow.core.lifecycle import Lifecycle
from megaflow.core.states import TaskState
from megaflow.core.tasks import Attempt, RunSpec, TaskRecord, TaskResult, TaskSpec
from megaflow.storage.lease import Lease


class Transition(NamedTuple):
    """A requested state change. ``expect`` guards against lost updates.

    A named tuple, not a dataclass: the scheduler makes one per state change,
    and a tuple is the cheapest immutable record to build."""

    task_id: str
    dst: TaskState
    expect: TaskState | None = None
    error: str | None = None


def submission_ids(tasks: Sequence[TaskSpec]) -> list[str]:
    """The task ids of one ``add_tasks`` submission, in order; raises
    ``AlreadyExists`` when an id appears twice in it."""
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise AlreadyExists(f"task id {dup!r} appears twice in one submission")
    return ids


class MetadataStore(Lifecycle, abc.ABC):
    """Runs, tasks, attempts and results, with the task state machine enforced.

    Entering ``SCHEDULED`` counts an attempt; entering ``PREEMPTED`` counts a
    preemption. Illegal transitions raise ``InvalidTransition`` and leave the
    whole batch unapplied.
    """

    @abc.abstractmethod
    async def create_run(self, run: RunSpec) -> None: ...

    @abc.abstractmethod
    async def get_run(self, run_id: str) -> RunSpec: ...

    @abc.abstractmethod
    async def list_runs(self) -> list[RunSpec]: ...

    @abc.abstractmethod
    async def add_tasks(self, tasks: Sequence[TaskSpec]) -> list[TaskRecord]:
        """Insert tasks in state QUEUED, all or none; duplicate ids raise ``AlreadyExists``."""

    @abc.abstractmethod
    async def get_task(self, task_id: str) -> TaskRecord: ...

    @abc.abstractmethod
    async def list_tasks(
        self,
        run_id: str | None = None,
        states: Iterable[TaskState] | None = None,
        limit: int | None = None,
    ) -> list[TaskRecord]:
        """Tasks in arrival order, filtered by run and state."""

    @abc.abstractmethod
    async def count_by_state(self, run_id: str | None = None) -> dict[TaskState, int]: ...

    @abc.abstractmethod
    async def transition_many(self, transitions: Sequence[Transition]) -> None:
        """Apply the transitions in one transaction, in order: all or none."""

    async def transition(
        self,
        task_id: str,
        dst: TaskState,
        *,
        expect: TaskState | None = None,
        error: str | None = None,
    ) -> TaskRecord:
        await self.transition_many([Transition(task_id, dst, expect, error)])
        return await self.get_task(task_id)

    @abc.abstractmethod
    async def put_attempt(self, attempt: Attempt) -> None:
        """Insert or replace the attempt ``(task_id, number)``."""

    @abc.abstractmethod
    async def list_attempts(self, task_id: str) -> list[Attempt]: ...

    async def put_attempts(self, attempts: Sequence[Attempt]) -> None:
        """Insert or replace many attempts; backends may do it in one transaction."""
        for a in attempts:
            await self.put_attempt(a)

    async def put_results(self, results: Sequence[TaskResult]) -> None:
        """Store many results; backends may do it in one transaction."""
        for r in results:
            await self.put_result(r)

    @abc.abstractmethod
    async def put_result(self, result: TaskResult) -> None: ...

    @abc.abstractmethod
    async def get_result(self, task_id: str) -> TaskResult: ...

    @abc.abstractmethod
    async def list_results(self, run_id: str) -> list[TaskResult]: ...

    # -- the driver lease (megaflow.storage.lease) ---------------------------------
    @abc.abstractmethod
    async def claim_lease(
        self, run_id: str, owner: str, ttl_s: float, *, replaces: str | None = None
    ) -> Lease:
        """Take the driver lease of ``run_id`` for ``owner`` until ``ttl_s`` from now,
        in one atomic write: when no lease is held, the last one has ended, ``owner``
        holds it (a renewal), or ``replaces`` does (a holder known to be dead).
        Otherwise raise ``AlreadyExists`` naming the holder
        (:func:`~megaflow.storage.lease.held_by`)."""

    @abc.abstractmethod
    async def release_lease(self, run_id: str, owner: str) -> None:
        """End the lease of ``run_id`` if ``owner`` holds it; otherwise do nothing."""

    @abc.abstractmethod
    async def get_lease(self, run_id: str) -> Lease | None:
        """The lease of ``run_id`` as stored (ended or not); None when there is none."""


@dataclass(order=True, slots=True)
class QueuedTask:
    """A queue entry. Orders by priority (higher first), then arrival."""

    sort_key: tuple[int, int] = field(init=False, repr=False)
    spec: TaskSpec = field(compare=False)
    seq: int = field(compare=False)

    def __post_init__(self) -> None:
        self.sort_key = (-self.spec.priority, self.seq)

    @property
    def task_id(self) -> str:
        return self.spec.id


class TaskQueue(Lifecycle, abc.ABC):
    """Tasks waiting for a slot. Its contents can always be rebuilt from the
    metadata store (see :mod:`megaflow.storage.recovery`)."""

    @abc.abstractmethod
    async def push(self, items: Sequence[QueuedTask]) -> None: ...

    @abc.abstractmethod
    async def pop(self, n: int = 1) -> list[QueuedTask]:
        """Take up to ``n`` entries, highest priority first, then oldest. Never blocks."""

    @abc.abstractmethod
    async def peek(self, n: int = 1) -> list[QueuedTask]: ...

    @abc.abstractmethod
    async def remove(self, task_ids: Iterable[str]) -> int:
        """Drop entries (for cancellation); returns how many were found."""

    @abc.abstractmethod
    async def size(self) -> int: ...

    async def ack(self, task_ids: Iterable[str]) -> int:
        """Confirm that popped entries were recorded by the consumer; returns how
        many were pending. Queues that deliver at least once (Redis) redeliver an
        entry popped but never acknowledged; in-process queues need no ack."""
        return 0


class Subscription(abc.ABC):
    """A bounded stream of events for one subscriber."""

    @abc.abstractmethod
    def __aiter__(self) -> AsyncIterator[Event]: ...

    @abc.abstractmethod
    async def get(self, timeout: float | None = None) -> Event:
        """Next event; raises ``TimeoutError`` after ``timeout`` seconds."""

    @abc.abstractmethod
    async def close(self) -> None: ...


class EventBus(Lifecycle, abc.ABC):
    """Publish/subscribe. Buffers are bounded: a full subscriber slows the
    publisher down (backpressure) instead of growing without limit."""

    @abc.abstractmethod
    async def publish(self, event: Event) -> None: ...

    @abc.abstractmethod
    async def subscribe(
        self, kinds: Iterable[str] | None = None, maxsize: int = 1024
    ) -> Subscription:
        """Subscribe to the given event kinds (all when ``None``)."""

    def listens(self, kind: str) -> bool:
        """Whether an event of ``kind`` published now could reach a subscriber.

        A publisher may skip building an event nobody would get. A bus whose
        subscribers live in other processes cannot know, so the default is True."""
        return True


@dataclass(frozen=True, slots=True)
class ArtifactRef:
    key: str
    size: int
    sha256: str


class ArtifactStore(Lifecycle, abc.ABC):
    """Bulky outputs under slash-separated keys. Keys never escape the store."""

    @abc.abstractmethod
    async def put(self, key: str, data: bytes) -> ArtifactRef: ...

    @abc.abstractmethod
    async def get(self, key: str) -> bytes:
        """Read and verify against the stored checksum; ``NotFound`` if absent."""

    @abc.abstractmethod
    async def exists(self, key: str) -> bool: ...

    @abc.abstractmethod
    async def delete(self, key: str) -> None: ...

    @abc.abstractmethod
    async def list(self, prefix: str = "") -> list[str]: ...

    def location(self, key: str) -> str | None:
        """Where a reader outside MegaFlow (an inference engine loading a
        checkpoint) finds the artifacts under ``key``: a directory or a URI;
        None when the store has no such address."""
        return None

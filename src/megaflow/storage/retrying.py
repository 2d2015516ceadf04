"""Stores that wait out transient faults: one wrapper per interface.

:class:`~megaflow.storage.factory.Stores` wraps each store of a run in one
of these, so every call on the task path (metadata, queue, events,
artifacts) goes through the store's :class:`~megaflow.storage.outage.Outage`:
a connection refused or lost, an exhausted pool, a timeout or a full disk is
retried with backoff until the store returns or its deadline passes. The
scheduler, the executor and the services above see either the call's
result or, after the deadline, one :class:`StoreUnavailable` naming the
store; never a finished task turned into a failed one by a store that was
away for a few seconds.

A retry may repeat a write whose first try committed before its reply was
lost. Writes that replace (attempts, results, artifacts, queue pushes) may
simply be repeated; for the others the wrapper checks what a refused retry
means: a run or tasks that now exist exactly as submitted, or tasks already
in the states a batch of transitions leads to, are the first try's work.

``start()`` and ``stop()`` are not retried: a store that is not there when
a run starts fails at once with its own error.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from megaflow.core.errors import AlreadyExists, InvalidTransition, StorageError, StoreUnavailable
from megaflow.core.events import Event
from megaflow.core.states import TaskState
from megaflow.core.tasks import Attempt, RunSpec, TaskRecord, TaskResult, TaskSpec
from megaflow.storage.abstract import (
    ArtifactRef,
    ArtifactStore,
    EventBus,
    MetadataStore,
    QueuedTask,
    Subscription,
    TaskQueue,
    Transition,
)
from megaflow.storage.lease import Lease
from megaflow.storage.outage import Outage
from megaflow.storage.spool import Spool


def fence_writes(metadata: MetadataStore, fence: Callable[[], Awaitable[None]]) -> None:
    """Await ``fence`` before every write of ``metadata``. Only the stores of a run
    (:class:`RetryingMetadataStore`, which every config-built run has) take a fence;
    any other store is refused, so a driver is never left unfenced unseen."""
    if not isinstance(metadata, RetryingMetadataStore):
        raise TypeError(f"only a RetryingMetadataStore takes a fence, not {type(metadata)}")
    metadata.fence = fence


class RetryingMetadataStore(MetadataStore):
    """With a ``spool``, the writes of a finished attempt (its attempt record,
    result and state changes) that the store could not take before its deadline
    are kept on local disk (:mod:`megaflow.storage.spool`) and written by the
    next ``start()``; reads still raise."""

    def __init__(self, inner: MetadataStore, outage: Outage, spool: Spool | None = None) -> None:
        self.inner = inner
        self.outage = outage
        self.spool = spool
        self.fence: Callable[[], Awaitable[None]] | None = None
        """Awaited before every write: raises once this process no longer drives the
        run (:meth:`~megaflow.storage.lease.DriverLease.fence`), so a driver woken
        from a freeze writes nothing over the work of the one that took over."""

    async def start(self) -> None:
        await self.inner.start()
        if self.spool is not None:
            try:
                await self.spool.replay(self.inner)
            except BaseException:
                await self.inner.stop()
                raise

    async def _write(self, call: Callable[[], Awaitable[object]], keep: Callable[[], None]) -> None:
        """``call`` (a write through the outage loop); once the store is given up
        (or writes kept before are not yet written: order must hold), ``keep`` it."""
        if self.fence is not None:
            await self.fence()
        spool = self.spool
        if spool is not None and not await spool.drain(self.inner):
            self._keep(keep)
            return
        try:
            await call()
        except StoreUnavailable as gone:
            if spool is None:
                raise
            self._keep(keep, gone)

    def _keep(self, keep: Callable[[], None], gone: StoreUnavailable | None = None) -> None:
        """Keep a write in the spool; if even that fails (its disk is full too), the
        store's outage is the error the caller gets."""
        try:
            keep()
        except StorageError as exc:
            err = gone or self.outage.dead
            if err is None:
                raise
            raise err from exc

    async def create_run(self, run: RunSpec) -> None:
        async def settled(exc: Exception) -> bool | None:
            if isinstance(exc, AlreadyExists) and await self.inner.get_run(run.id) == run:
                return True
            return None

        await self.outage.call(
            f"record run {run.id}", lambda: _none(self.inner.create_run(run)), settled
        )

    async def get_run(self, run_id: str) -> RunSpec:
        return await self.outage.call(f"read run {run_id}", lambda: self.inner.get_run(run_id))

    async def list_runs(self) -> list[RunSpec]:
        return await self.outage.call("list runs", self.inner.list_runs)

    async def add_tasks(self, tasks: Sequence[TaskSpec]) -> list[TaskRecord]:
        async def settled(exc: Exception) -> list[TaskRecord] | None:
            if not isinstance(exc, AlreadyExists):
                return None
            records = [await self.inner.get_task(t.id) for t in tasks]
            if [r.spec for r in records] == list(tasks):
                return records  # the first try committed; its reply was lost
            return None

        return await self.outage.call(
            f"record {len(tasks)} tasks", lambda: self.inner.add_tasks(tasks), settled
        )

    async def get_task(self, task_id: str) -> TaskRecord:
        return await self.outage.call(f"read task {task_id}", lambda: self.inner.get_task(task_id))

    async def list_tasks(
        self,
        run_id: str | None = None,
        states: Iterable[TaskState] | None = None,
        limit: int | None = None,
    ) -> list[TaskRecord]:
        wanted = None if states is None else list(states)
        return await self.outage.call(
            "list tasks", lambda: self.inner.list_tasks(run_id, wanted, limit)
        )

    async def count_by_state(self, run_id: str | None = None) -> dict[TaskState, int]:
        return await self.outage.call("count tasks", lambda: self.inner.count_by_state(run_id))

    async def transition_many(self, transitions: Sequence[Transition]) -> None:
        async def settled(exc: Exception) -> bool | None:
            if not isinstance(exc, InvalidTransition):
                return None
            final = {t.task_id: t.dst for t in transitions}
            for tid, dst in final.items():
                if (await self.inner.get_task(tid)).state is not dst:
                    return None
            return True  # every task is where the batch leads: the first try committed

        if not transitions:
            return
        await self._write(
            lambda: self.outage.call(
                f"record {len(transitions)} state changes",
                lambda: _none(self.inner.transition_many(transitions)),
                settled,
            ),
            lambda: self._spool().transitions(transitions),
        )

    async def put_attempt(self, attempt: Attempt) -> None:
        await self.put_attempts([attempt])

    async def put_attempts(self, attempts: Sequence[Attempt]) -> None:
        if attempts:
            await self._write(
                lambda: self.outage.call(
                    f"record {len(attempts)} attempts", lambda: self.inner.put_attempts(attempts)
                ),
                lambda: self._spool().attempts(attempts),
            )

    async def list_attempts(self, task_id: str) -> list[Attempt]:
        return await self.outage.call(
            f"read the attempts of {task_id}", lambda: self.inner.list_attempts(task_id)
        )

    async def put_result(self, result: TaskResult) -> None:
        await self.put_results([result])

    async def put_results(self, results: Sequence[TaskResult]) -> None:
        if results:
            await self._write(
                lambda: self.outage.call(
                    f"record {len(results)} results", lambda: self.inner.put_results(results)
                ),
                lambda: self._spool().results(results),
            )

    def _spool(self) -> Spool:
        assert self.spool is not None
        return self.spool

    async def get_result(self, task_id: str) -> TaskResult:
        return await self.outage.call(
            f"read the result of {task_id}", lambda: self.inner.get_result(task_id)
        )

    async def list_results(self, run_id: str) -> list[TaskResult]:
        return await self.outage.call(
            f"list the results of {run_id}", lambda: self.inner.list_results(run_id)
        )

    async def claim_lease(
        self, run_id: str, owner: str, ttl_s: float, *, replaces: str | None = None
    ) -> Lease:
        async def settled(exc: Exception) -> Lease | None:
            held = await self.inner.get_lease(run_id)  # refused after a lost reply: ours
            return held if isinstance(exc, AlreadyExists) and held and held.owner == owner else None

        return await self.outage.call(
            f"claim the driver lease of {run_id}",
            lambda: self.inner.claim_lease(run_id, owner, ttl_s, replaces=replaces),
            settled,
        )

    async def release_lease(self, run_id: str, owner: str) -> None:
        await self.outage.call(
            f"release the driver lease of {run_id}",
            lambda: _none(self.inner.release_lease(run_id, owner)),
        )

    async def get_lease(self, run_id: str) -> Lease | None:
        return await self.outage.call(
            f"read the driver lease of {run_id}", lambda: self.inner.get_lease(run_id)
        )


class RetryingTaskQueue(TaskQueue):
    def __init__(self, inner: TaskQueue, outage: Outage) -> None:
        self.inner = inner
        self.outage = outage

    async def start(self) -> None:
        await self.inner.start()

    async def stop(self) -> None:
        await self.inner.stop()

    async def push(self, items: Sequence[QueuedTask]) -> None:
        # pushing a queued id again does nothing, so a repeated push is harmless
        await self.outage.call(f"queue {len(items)} tasks", lambda: self.inner.push(items))

    async def pop(self, n: int = 1) -> list[QueuedTask]:
        # an entry popped by a try whose reply was lost stays pending, unacknowledged,
        # and is delivered again after claim_after_s: not lost
        return await self.outage.call("take tasks", lambda: self.inner.pop(n))

    async def peek(self, n: int = 1) -> list[QueuedTask]:
        return await self.outage.call("peek at tasks", lambda: self.inner.peek(n))

    async def remove(self, task_ids: Iterable[str]) -> int:
        ids = list(task_ids)
        return await self.outage.call("remove tasks", lambda: self.inner.remove(ids))

    async def size(self) -> int:
        return await self.outage.call("measure the queue", self.inner.size)

    async def ack(self, task_ids: Iterable[str]) -> int:
        ids = list(task_ids)
        return await self.outage.call("acknowledge tasks", lambda: self.inner.ack(ids))


class RetryingEventBus(EventBus):
    """Publishing and subscribing retry; a subscription's reader (the backend's own)
    reconnects by itself."""

    def __init__(self, inner: EventBus, outage: Outage) -> None:
        self.inner = inner
        self.outage = outage

    async def start(self) -> None:
        await self.inner.start()

    async def stop(self) -> None:
        await self.inner.stop()

    async def publish(self, event: Event) -> None:
        await self.outage.call(f"publish {event.kind}", lambda: self.inner.publish(event))

    async def subscribe(
        self, kinds: Iterable[str] | None = None, maxsize: int = 1024
    ) -> Subscription:
        wanted = None if kinds is None else list(kinds)
        return await self.outage.call(
            "subscribe to events", lambda: self.inner.subscribe(wanted, maxsize)
        )

    def listens(self, kind: str) -> bool:
        return self.inner.listens(kind)


class RetryingArtifactStore(ArtifactStore):
    """The artifact store, its calls waiting out outages; ``location`` is the backend's."""

    def __init__(self, inner: ArtifactStore, outage: Outage) -> None:
        self.inner = inner
        self.outage = outage

    def location(self, key: str) -> str | None:
        return self.inner.location(key)

    async def start(self) -> None:
        await self.inner.start()

    async def stop(self) -> None:
        await self.inner.stop()

    async def put(self, key: str, data: bytes) -> ArtifactRef:
        return await self.outage.call(f"write artifact {key!r}", lambda: self.inner.put(key, data))

    async def get(self, key: str) -> bytes:
        return await self.outage.call(f"read artifact {key!r}", lambda: self.inner.get(key))

    async def exists(self, key: str) -> bool:
        return await self.outage.call(f"find artifact {key!r}", lambda: self.inner.exists(key))

    async def delete(self, key: str) -> None:
        await self.outage.call(f"delete artifact {key!r}", lambda: _none(self.inner.delete(key)))

    async def list(self, prefix: str = "") -> list[str]:
        return await self.outage.call(f"list artifacts {prefix!r}", lambda: self.inner.list(prefix))


async def _none(aw: Any) -> bool:
    """Await a call that returns nothing; True, so that a retried call's result
    (None is 'not settled') stays distinct."""
    await aw
    return True

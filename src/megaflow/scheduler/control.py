"""The control plane as callers see it, in-process or over gRPC.

:class:`ControlPlane` is what the CLI and SDK talk to: submit runs and
tasks, cancel, look at a run and its tasks, wait for it, and watch its
events. :class:`LocalControlPlane` wraps a running
:class:`~megaflow.scheduler.service.Scheduler` and its stores;
:class:`~megaflow.rpc.scheduler_client.GrpcControlPlane` reaches one
through the Scheduler service. Both pass the same contract tests.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Iterable
from types import TracebackType
from typing import Self

from pydantic import BaseModel, ConfigDict

from megaflow.core.errors import InvalidInput
from megaflow.core.events import Event
from megaflow.core.states import TaskState
from megaflow.core.tasks import RunSpec, TaskRecord, TaskSpec
from megaflow.scheduler.service import Scheduler
from megaflow.storage.abstract import Subscription


class RunStatus(BaseModel):
    """A run, its tasks by state, and whether every task is terminal."""

    model_config = ConfigDict(extra="forbid")

    run: RunSpec
    counts: dict[TaskState, int]
    done: bool

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def status_of(run: RunSpec, counts: dict[TaskState, int]) -> RunStatus:
    return RunStatus(run=run, counts=counts, done=all(s.terminal for s in counts))


class EventStream(abc.ABC):
    """Events as they are published; subscribed before the stream is handed out.
    Close it (or use ``async with``) to unsubscribe."""

    @abc.abstractmethod
    def __aiter__(self) -> AsyncIterator[Event]: ...

    @abc.abstractmethod
    async def close(self) -> None: ...

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


class ControlPlane(abc.ABC):
    """Submit and follow runs. Errors: ``NotFound`` (unknown run), ``InvalidInput``
    (a task of another run, bad ids), ``AlreadyExists`` (a duplicate task id)."""

    @abc.abstractmethod
    async def submit_run(self, run: RunSpec, tasks: list[TaskSpec]) -> int:
        """Record ``run`` (if new) and queue ``tasks``; returns how many were queued."""

    @abc.abstractmethod
    async def submit_tasks(self, run_id: str, tasks: list[TaskSpec]) -> int:
        """Queue more tasks of a run that exists."""

    @abc.abstractmethod
    async def cancel(self, run_id: str, task_id: str | None = None) -> int:
        """Cancel one task or every unfinished task of a run; returns how many."""

    @abc.abstractmethod
    async def get_run(self, run_id: str) -> RunStatus: ...

    @abc.abstractmethod
    async def list_runs(self) -> list[RunStatus]: ...

    @abc.abstractmethod
    async def wait(self, run_id: str) -> RunStatus:
        """Return once every task of the run is terminal."""

    @abc.abstractmethod
    async def list_tasks(
        self, run_id: str, states: Iterable[TaskState] | None = None
    ) -> list[TaskRecord]: ...

    @abc.abstractmethod
    async def watch(
        self, run_id: str | None = None, kinds: Iterable[str] | None = None
    ) -> EventStream:
        """Events of one run (or all), of some kinds (or all), from now on."""


def _check_tasks(run_id: str, tasks: list[TaskSpec]) -> None:
    for t in tasks:
        if t.run_id != run_id:
            raise InvalidInput(f"task {t.id} belongs to run {t.run_id}, not to {run_id}")


class _LocalStream(EventStream):
    def __init__(self, sub: Subscription, run_id: str | None) -> None:
        self._sub = sub
        self._run_id = run_id

    async def _events(self) -> AsyncIterator[Event]:
        async for event in self._sub:
            if self._run_id is None or getattr(event, "run_id", None) == self._run_id:
                yield event

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._events()

    async def close(self) -> None:
        await self._sub.close()


class LocalControlPlane(ControlPlane):
    """The control plane of a scheduler in this process (started by the caller)."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self.stores = scheduler.stores

    async def submit_run(self, run: RunSpec, tasks: list[TaskSpec]) -> int:
        _check_tasks(run.id, tasks)
        await self.scheduler.submit(run, tasks)
        return len(tasks)

    async def submit_tasks(self, run_id: str, tasks: list[TaskSpec]) -> int:
        run = await self.stores.metadata.get_run(run_id)
        return await self.submit_run(run, tasks)

    async def cancel(self, run_id: str, task_id: str | None = None) -> int:
        await self.stores.metadata.get_run(run_id)
        if task_id is not None:
            task = await self.stores.metadata.get_task(task_id)
            if task.spec.run_id != run_id:
                raise InvalidInput(f"task {task_id} belongs to run {task.spec.run_id}")
        return await self.scheduler.cancel(run_id, task_id)

    async def get_run(self, run_id: str) -> RunStatus:
        run = await self.stores.metadata.get_run(run_id)
        return status_of(run, await self.stores.metadata.count_by_state(run_id))

    async def list_runs(self) -> list[RunStatus]:
        md = self.stores.metadata
        return [status_of(r, await md.count_by_state(r.id)) for r in await md.list_runs()]

    async def wait(self, run_id: str) -> RunStatus:
        run = await self.stores.metadata.get_run(run_id)
        return status_of(run, await self.scheduler.wait(run_id))

    async def list_tasks(
        self, run_id: str, states: Iterable[TaskState] | None = None
    ) -> list[TaskRecord]:
        await self.stores.metadata.get_run(run_id)
        chosen = list(states) if states is not None else None
        return await self.stores.metadata.list_tasks(run_id, states=chosen or None)

    async def watch(
        self, run_id: str | None = None, kinds: Iterable[str] | None = None
    ) -> EventStream:
        chosen = list(kinds) if kinds is not None else None
        sub = await self.stores.events.subscribe(chosen or None, maxsize=4096)
        return _LocalStream(sub, run_id)

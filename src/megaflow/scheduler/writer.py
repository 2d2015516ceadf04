"""Write-behind of state changes: many transitions, one transaction.

The dispatcher decides in memory and records asynchronously: transitions,
attempts and results collect in a buffer that one background task flushes
as soon as the event loop is free, so a burst of thousands of state changes
costs one metadata transaction. Results and attempts are written before the
transitions of the same flush, so a crash never leaves a task terminal
without its result; a task whose terminal transition was not flushed is
simply in flight after a crash and is recovered (retried) on resume. Events
queued with :meth:`StateWriter.event` are published after the flush that
persisted the change they announce; one queued with :meth:`StateWriter.announce`
is built only then, and only if the bus has a subscriber for its kind (most
runs have none for the per-task events, and building one cost more than any
other record of a no-op task).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from megaflow.core.errors import LeaseLost, MegaFlowError, StoreUnavailable
from megaflow.core.events import Event
from megaflow.core.tasks import Attempt, TaskResult
from megaflow.storage.abstract import EventBus, MetadataStore, Transition

log = logging.getLogger(__name__)


class StateWriter:
    def __init__(self, store: MetadataStore, bus: EventBus | None = None) -> None:
        self.store = store
        self.bus = bus
        self._events: list[tuple[str, Callable[..., Event] | None, Any]] = []
        """(kind, build, its arguments), or (kind, None, the event) for one built already."""
        self._transitions: list[Transition] = []
        self._attempts: list[Attempt] = []
        self._results: list[TaskResult] = []
        self._ready = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._poked = False
        """Set by a poke, cleared when the loop takes the poke: adding more until
        then needs no poke of its own."""
        self._task: asyncio.Task[None] | None = None
        self.flushes = 0

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop(), name="state-writer")

    async def stop(self) -> None:
        await self.flush()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    def transition(self, t: Transition) -> None:
        self._transitions.append(t)
        if not self._poked:
            self._poke()

    def attempt(self, a: Attempt) -> None:
        self._attempts.append(a)
        if not self._poked:
            self._poke()

    def result(self, r: TaskResult) -> None:
        self._results.append(r)
        if not self._poked:
            self._poke()

    def event(self, e: Event) -> None:
        """Publish ``e`` once the changes recorded before it are in the store."""
        self._events.append((e.kind, None, e))
        if not self._poked:
            self._poke()

    def announce(self, kind: str, build: Callable[..., Event], *args: Any) -> None:
        """Publish ``build(*args)``, an event of ``kind``, once the changes recorded
        before it are in the store; not built at all when nobody listens then."""
        self._events.append((kind, build, args))
        if not self._poked:
            self._poke()

    def _poke(self) -> None:
        self._poked = True
        if not self._ready.is_set():
            self._idle.clear()
            self._ready.set()

    async def flush(self) -> None:
        """Return once everything added so far is in the store."""
        if self._task is None:
            await self._write()
            return
        while (
            self._transitions
            or self._attempts
            or self._results
            or self._events
            or not self._idle.is_set()
        ):
            self._poke()
            await self._idle.wait()

    async def _loop(self) -> None:
        while True:
            await self._ready.wait()
            self._ready.clear()
            self._poked = False
            await asyncio.sleep(0)  # let the current burst finish adding
            try:
                await self._write()
            except StoreUnavailable as exc:  # the stores waited out what they could
                log.error("state write failed: %s; the changes are lost until resume", exc)
            except LeaseLost as exc:  # another driver has the run: its writes count
                log.warning("state write refused: %s", exc)
            except Exception:
                log.exception("state write failed; the changes are lost until resume")
            if not self._ready.is_set():
                self._idle.set()

    async def _write(self) -> None:
        transitions, self._transitions = self._transitions, []
        attempts, self._attempts = self._attempts, []
        results, self._results = self._results, []
        events, self._events = self._events, []
        store = self.store
        await store.put_attempts(attempts)
        await store.put_results(results)
        if transitions:
            self.flushes += 1
            try:
                await store.transition_many(transitions)
            except (StoreUnavailable, LeaseLost):
                raise  # the store is gone, or not ours to write: not one change wrong
            except MegaFlowError as exc:
                # One bad change must not drop the others: apply them one by one.
                log.warning("batched state write failed (%s); applying one by one", exc)
                for t in transitions:
                    try:
                        await store.transition_many([t])
                    except MegaFlowError as one:
                        log.error("state change %s -> %s dropped: %s", t.task_id, t.dst.value, one)
        bus = self.bus
        if bus is not None:
            for kind, build, arg in events:
                if build is None:
                    await bus.publish(arg)
                elif bus.listens(kind):
                    await bus.publish(build(*arg))

"""Metadata writes kept on local disk while the metadata store is given up.

When the metadata store stays away past its outage deadline, the run stops;
but the writes it had not yet made (a finished task's attempt, its graded
result, its move to SUCCEEDED) must not be lost, or the task would run
again. :class:`Spool` appends them, in order, to a local JSON-lines file
(one per metadata store, named by a digest of where the store lives), each
line written and fsynced before the write counts as done. Once one write is
spooled, every later one is too, so their order is kept. The next time that
store starts (``megaflow run --resume``), :meth:`Spool.replay` applies the
file in order before anything else and removes it: the tasks it finished
are finished, and resume runs only what was really in flight.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from megaflow.core.errors import InvalidTransition, NotFound, StorageError
from megaflow.core.states import TaskState
from megaflow.core.tasks import Attempt, TaskResult
from megaflow.storage.abstract import MetadataStore, Transition
from megaflow.storage.outage import transient

log = logging.getLogger(__name__)


class Spool:
    def __init__(self, folder: str | Path, where: str) -> None:
        digest = hashlib.sha256(where.encode()).hexdigest()[:16]
        self.path = Path(folder) / f"metadata-{digest}.jsonl"
        self.where = where
        self.active = False
        """True once a write was spooled in this process: later ones follow it."""
        self.written = 0
        self.retry_s = 30.0
        self._next_try = 0.0

    def _append(self, kind: str, items: list[Any]) -> None:
        line = json.dumps({"kind": kind, "items": items}, separators=(",", ":")) + "\n"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line.encode())
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise StorageError(f"cannot keep metadata writes in {self.path}: {exc}") from exc
        if not self.active:
            self._next_try = time.monotonic() + self.retry_s
            log.warning(
                "metadata writes are kept in %s until the store (%s) is back; "
                "`megaflow run --resume` writes them",
                self.path, self.where,
            )  # fmt: skip
        self.active = True
        self.written += len(items)

    def attempts(self, attempts: Sequence[Attempt]) -> None:
        self._append("attempts", [a.model_dump(mode="json") for a in attempts])

    def results(self, results: Sequence[TaskResult]) -> None:
        self._append("results", [r.model_dump(mode="json") for r in results])

    def transitions(self, transitions: Sequence[Transition]) -> None:
        items = [
            [t.task_id, t.dst.value, None if t.expect is None else t.expect.value, t.error]
            for t in transitions
        ]
        self._append("transitions", items)

    async def drain(self, store: MetadataStore) -> bool:
        """In a process that goes on (a served scheduler), write what was kept once
        the store answers again, trying at most once per ``retry_s`` (the first
        ``retry_s`` after the spool began; a run that stops meanwhile does not wait
        on a store that is away); True when the spool is empty and writes may go to
        the store again (in order)."""
        if not self.active:
            return True
        now = time.monotonic()
        if now < self._next_try:
            return False
        self._next_try = now + self.retry_s
        try:
            await self.replay(store)
        except Exception as exc:
            if not transient(exc):
                raise
            return False
        self.active = False
        return True

    async def replay(self, store: MetadataStore) -> int:
        """Apply a spool left by an earlier process to ``store``, in order, then
        remove it; returns how many writes it held. Writes the store already has
        (a result of a task finished since, a transition already made) are skipped."""
        if not self.path.exists():
            return 0
        entries = []
        for line in self.path.read_text().splitlines():
            try:
                entries.append(json.loads(line))
            except json.JSONDecodeError:
                log.warning("a torn line at the end of %s is skipped", self.path)
        n = 0
        for entry in entries:
            kind, items = entry["kind"], entry["items"]
            n += len(items)
            if kind == "attempts":
                await store.put_attempts([Attempt.model_validate(i) for i in items])
            elif kind == "results":
                for item in items:
                    try:
                        await store.put_result(TaskResult.model_validate(item))
                    except NotFound as exc:
                        log.warning("kept result skipped: %s", exc)
            else:
                await self._transitions(store, items)
        self.path.unlink()
        log.warning("wrote %d kept metadata writes from %s", n, self.path)
        return n

    @staticmethod
    async def _transitions(store: MetadataStore, items: list[list[Any]]) -> None:
        batch = [
            Transition(tid, TaskState(dst), None if exp is None else TaskState(exp), err)
            for tid, dst, exp, err in items
        ]
        try:
            await store.transition_many(batch)
        except InvalidTransition:
            for t in batch:  # some were made before the store went away
                try:
                    await store.transition_many([t])
                except InvalidTransition as exc:
                    log.debug("kept state change skipped: %s", exc)

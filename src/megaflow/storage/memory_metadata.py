"""In-process metadata store: dicts, the same state machine, no disk.

For tests, benchmarks and dry runs where nothing needs to outlive the
process. It keeps the contract of every :class:`MetadataStore`: ids are
unique, a batch of transitions is checked in order against the state machine
(``expect`` guards included) and applied all or none, entering ``SCHEDULED``
counts an attempt and entering ``PREEMPTED`` a preemption. Nothing is
serialised: the store keeps the specs, attempts and results it is handed
(so a caller must not change one afterwards) and hands out copies.

Several stores may share one :class:`MemoryDatabase`, as several processes
share a database file; a call never awaits in the middle, so each call is
atomic on the event loop.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from megaflow.core.errors import AlreadyExists, NotFound, StorageError
from megaflow.core.states import TaskState
from megaflow.core.tasks import Attempt, RunSpec, TaskRecord, TaskResult, TaskSpec
from megaflow.storage.abstract import MetadataStore, Transition, submission_ids
from megaflow.storage.lease import Lease, held_by
from megaflow.storage.transition_plan import plan_transitions


@dataclass(slots=True)
class _Row:
    spec: TaskSpec
    state: TaskState
    seq: int
    updated_at: float
    attempts: int = 0
    preemptions: int = 0
    error: str | None = None

    def record(self) -> TaskRecord:
        return TaskRecord(
            spec=self.spec.model_copy(deep=True),
            state=self.state,
            attempts=self.attempts,
            preemptions=self.preemptions,
            seq=self.seq,
            updated_at=self.updated_at,
            error=self.error,
        )


@dataclass
class MemoryDatabase:
    """What a :class:`MemoryMetadataStore` holds; share one between stores."""

    runs: dict[str, RunSpec] = field(default_factory=dict)
    tasks: dict[str, _Row] = field(default_factory=dict)
    """In arrival (``seq``) order: rows are only ever appended."""
    attempts: dict[str, dict[int, Attempt]] = field(default_factory=dict)
    results: dict[str, TaskResult] = field(default_factory=dict)
    seq: int = 0
    leases: dict[str, Lease] = field(default_factory=dict)


class MemoryMetadataStore(MetadataStore):
    def __init__(self, db: MemoryDatabase | None = None) -> None:
        self.db = MemoryDatabase() if db is None else db
        self._started = False

    async def start(self) -> None:
        self._started = True

    async def stop(self) -> None:
        self._started = False

    def _data(self) -> MemoryDatabase:
        if not self._started:
            raise StorageError("MemoryMetadataStore is not started; call await store.start()")
        return self.db

    # -- runs ---------------------------------------------------------------
    async def create_run(self, run: RunSpec) -> None:
        runs = self._data().runs
        if run.id in runs:
            raise AlreadyExists(f"run {run.id!r} already exists")
        runs[run.id] = run.model_copy(deep=True)

    async def get_run(self, run_id: str) -> RunSpec:
        run = self._data().runs.get(run_id)
        if run is None:
            raise NotFound(f"run {run_id!r} not found")
        return run.model_copy(deep=True)

    async def list_runs(self) -> list[RunSpec]:
        runs = sorted(self._data().runs.values(), key=lambda r: r.created_at)
        return [r.model_copy(deep=True) for r in runs]

    # -- tasks --------------------------------------------------------------
    async def add_tasks(self, tasks: Sequence[TaskSpec]) -> list[TaskRecord]:
        db = self._data()
        if not tasks:
            return []
        ids = submission_ids(tasks)
        rows = db.tasks
        for i in ids:
            if i in rows:
                raise AlreadyExists(f"task id {i!r} already exists")
        now = time.time()
        queued = TaskState.QUEUED
        first = db.seq + 1
        db.seq += len(tasks)
        out = []
        for k, t in enumerate(tasks, first):
            rows[t.id] = _Row(t, queued, k, now)
            out.append(TaskRecord(spec=t, state=queued, seq=k, updated_at=now))
        return out

    async def get_task(self, task_id: str) -> TaskRecord:
        row = self._data().tasks.get(task_id)
        if row is None:
            raise NotFound(f"task {task_id!r} not found")
        return row.record()

    async def list_tasks(
        self,
        run_id: str | None = None,
        states: Iterable[TaskState] | None = None,
        limit: int | None = None,
    ) -> list[TaskRecord]:
        rows: Iterable[_Row] = self._data().tasks.values()
        if run_id is not None:
            rows = (r for r in rows if r.spec.run_id == run_id)
        if states is not None:
            wanted = {TaskState(s) for s in states}
            rows = (r for r in rows if r.state in wanted)
        out: list[TaskRecord] = []
        for r in rows:
            if limit is not None and len(out) >= limit:
                break
            out.append(r.record())
        return out

    async def count_by_state(self, run_id: str | None = None) -> dict[TaskState, int]:
        rows = self._data().tasks.values()
        if run_id is None:
            return dict(Counter(r.state for r in rows))
        return dict(Counter(r.state for r in rows if r.spec.run_id == run_id))

    async def transition_many(self, transitions: Sequence[Transition]) -> None:
        rows = self._data().tasks
        if not transitions:
            return
        current: dict[str, TaskState] = {}
        for t in transitions:  # a task's chain of the batch: read its row once
            tid = t[0]
            if tid not in current:
                row = rows.get(tid)
                if row is not None:
                    current[tid] = row.state
        changes = plan_transitions(transitions, current)  # raises before anything changes
        now = time.time()
        for c in changes:
            row = rows[c.task_id]
            row.state = c.dst
            row.attempts += c.attempts
            row.preemptions += c.preemptions
            row.updated_at = now
            if c.error is not None:
                row.error = c.error

    # -- attempts and results ------------------------------------------------
    async def put_attempt(self, attempt: Attempt) -> None:
        self._data().attempts.setdefault(attempt.task_id, {})[attempt.number] = attempt

    async def put_attempts(self, attempts: Sequence[Attempt]) -> None:
        table = self._data().attempts
        for a in attempts:
            by_number = table.get(a.task_id)
            if by_number is None:
                by_number = table[a.task_id] = {}
            by_number[a.number] = a

    async def list_attempts(self, task_id: str) -> list[Attempt]:
        by_number = self._data().attempts.get(task_id, {})
        return [by_number[n].model_copy(deep=True) for n in sorted(by_number)]

    async def put_result(self, result: TaskResult) -> None:
        await self.put_results([result])

    async def put_results(self, results: Sequence[TaskResult]) -> None:
        db = self._data()
        for r in results:
            if r.task_id not in db.tasks:
                raise NotFound(f"cannot store a result for unknown task {r.task_id!r}")
        for r in results:
            db.results[r.task_id] = r

    async def get_result(self, task_id: str) -> TaskResult:
        result = self._data().results.get(task_id)
        if result is None:
            raise NotFound(f"no result for task {task_id!r}")
        return result.model_copy(deep=True)

    async def list_results(self, run_id: str) -> list[TaskResult]:
        db = self._data()
        rows = db.tasks
        mine = [r for t, r in db.results.items() if rows[t].spec.run_id == run_id]
        mine.sort(key=lambda r: rows[r.task_id].seq)
        return [r.model_copy(deep=True) for r in mine]

    # -- the driver lease ----------------------------------------------------------
    async def claim_lease(
        self, run_id: str, owner: str, ttl_s: float, *, replaces: str | None = None
    ) -> Lease:
        leases, now = self._data().leases, time.time()
        held = leases.get(run_id)
        if held is not None and held.owner not in (owner, replaces) and held.expires_at >= now:
            raise held_by(held, now)
        leases[run_id] = lease = Lease(run_id, owner, now + ttl_s)
        return lease

    async def release_lease(self, run_id: str, owner: str) -> None:
        leases = self._data().leases
        held = leases.get(run_id)
        if held is not None and held.owner == owner:
            del leases[run_id]

    async def get_lease(self, run_id: str) -> Lease | None:
        return self._data().leases.get(run_id)

"""SQLite metadata store: the embedded default.

WAL mode with ``synchronous=NORMAL``: a committed transaction survives a
process crash (SIGKILL) and readers never block the writer. Writes of many
rows (tasks, transitions) go in one transaction each, which is what makes
batched state changes fast. Calls run on the event-loop thread: each is a
short, local operation, and keeping one connection on one thread avoids
SQLite's cross-thread locking.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from megaflow.core.errors import AlreadyExists, InvalidTransition, NotFound, StorageError
from megaflow.core.states import TRANSITIONS, TaskState, check_transition
from megaflow.core.tasks import Attempt, RunSpec, TaskRecord, TaskResult, TaskSpec
from megaflow.storage.abstract import MetadataStore, Transition, submission_ids
from megaflow.storage.lease import Lease, held_by
from megaflow.storage.private import private_file, tighten
from megaflow.storage.sql_rows import TASK_COLS, task_record
from megaflow.storage.sqlite_schema import migrate

_STATE = {s.value: s for s in TaskState}
_VALUE = {s: s.value for s in TaskState}  # dict lookups: an enum's .value is a property


class SqliteMetadataStore(MetadataStore):
    def __init__(self, path: str | Path = ":memory:") -> None:
        self.path = str(path)
        self._conn: sqlite3.Connection | None = None

    async def start(self) -> None:
        if self._conn is not None:
            return
        on_disk = self.path not in (":memory:", "")
        if on_disk:
            try:  # created 0600 in a 0700 folder; SQLite gives -wal and -shm the same mode
                os.close(private_file(self.path, os.O_RDONLY))
            except OSError as exc:
                raise StorageError(f"cannot create metadata database {self.path}: {exc}") from exc
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout=10000")  # first: other openers may hold locks
            conn.execute("PRAGMA journal_mode=WAL")
            if on_disk:
                for suffix in ("-wal", "-shm"):
                    tighten(self.path + suffix)
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            migrate(conn)
        except sqlite3.DatabaseError as exc:
            raise StorageError(f"cannot open metadata database {self.path}: {exc}") from exc
        self._conn = conn

    async def stop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StorageError("SqliteMetadataStore is not started; call await store.start()")
        return self._conn

    @property
    def schema_version(self) -> int:
        return int(self.conn.execute("PRAGMA user_version").fetchone()[0])

    # -- runs ---------------------------------------------------------------
    async def create_run(self, run: RunSpec) -> None:
        try:
            self.conn.execute(
                "INSERT INTO runs (id, name, created_at, spec) VALUES (?, ?, ?, ?)",
                (run.id, run.name, run.created_at, run.model_dump_json()),
            )
        except sqlite3.IntegrityError:
            raise AlreadyExists(f"run {run.id!r} already exists") from None

    async def get_run(self, run_id: str) -> RunSpec:
        row = self.conn.execute("SELECT spec FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise NotFound(f"run {run_id!r} not found")
        return RunSpec.model_validate_json(row[0])

    async def list_runs(self) -> list[RunSpec]:
        rows = self.conn.execute("SELECT spec FROM runs ORDER BY created_at").fetchall()
        return [RunSpec.model_validate_json(r[0]) for r in rows]

    # -- tasks --------------------------------------------------------------
    async def add_tasks(self, tasks: Sequence[TaskSpec]) -> list[TaskRecord]:
        if not tasks:
            return []
        ids = submission_ids(tasks)
        now = time.time()
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            (last,) = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM tasks").fetchone()
            records = [
                TaskRecord(spec=t, state=TaskState.QUEUED, seq=last + i + 1, updated_at=now)
                for i, t in enumerate(tasks)
            ]
            queued = _VALUE[TaskState.QUEUED]
            conn.executemany(
                "INSERT INTO tasks (id, run_id, seq, state, priority, updated_at, spec) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        r.spec.id,
                        r.spec.run_id,
                        r.seq,
                        queued,
                        r.spec.priority,
                        now,
                        r.spec.model_dump_json(),
                    )
                    for r in records
                ],
            )
            conn.execute("COMMIT")
        except sqlite3.IntegrityError:
            conn.execute("ROLLBACK")
            existing = self._existing(ids)
            raise AlreadyExists(f"task id {existing!r} already exists") from None
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return records

    def _existing(self, ids: list[str]) -> str | None:
        for i in ids:
            if self.conn.execute("SELECT 1 FROM tasks WHERE id = ?", (i,)).fetchone():
                return i
        return None

    async def get_task(self, task_id: str) -> TaskRecord:
        row = self.conn.execute(
            f"SELECT {TASK_COLS} FROM tasks WHERE id = ?", (task_id,)
        ).fetchone()
        if row is None:
            raise NotFound(f"task {task_id!r} not found")
        return task_record(row)

    async def list_tasks(
        self,
        run_id: str | None = None,
        states: Iterable[TaskState] | None = None,
        limit: int | None = None,
    ) -> list[TaskRecord]:
        where, args = [], []
        if run_id is not None:
            where.append("run_id = ?")
            args.append(run_id)
        if states is not None:
            values = [TaskState(s).value for s in states]
            if not values:
                return []
            where.append(f"state IN ({','.join('?' * len(values))})")
            args.extend(values)
        sql = f"SELECT {TASK_COLS} FROM tasks"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY seq"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [task_record(r) for r in self.conn.execute(sql, args).fetchall()]

    async def count_by_state(self, run_id: str | None = None) -> dict[TaskState, int]:
        if run_id is None:
            rows = self.conn.execute("SELECT state, COUNT(*) FROM tasks GROUP BY state")
        else:
            rows = self.conn.execute(
                "SELECT state, COUNT(*) FROM tasks WHERE run_id = ? GROUP BY state", (run_id,)
            )
        return {TaskState(s): int(n) for s, n in rows.fetchall()}

    async def transition_many(self, transitions: Sequence[Transition]) -> None:
        if not transitions:
            return
        conn = self.conn
        now = time.time()
        conn.execute("BEGIN IMMEDIATE")
        try:
            current = self._states_of([t.task_id for t in transitions])
            # Every transition is checked in order; a task's chain in this batch
            # (QUEUED -> SCHEDULED -> ... -> SUCCEEDED) then becomes one row
            # update with the same end result as applying them one by one.
            rows: dict[str, list[Any]] = {}
            for t in transitions:
                tid = t.task_id
                if tid not in current:
                    raise NotFound(f"task {tid!r} not found")
                src = current[tid]
                if t.expect is not None and src != t.expect:
                    raise InvalidTransition(
                        f"task {tid}: expected state {t.expect.value}, found {src.value}"
                    )
                dst = t.dst
                if dst not in TRANSITIONS[src]:
                    check_transition(src, dst, tid)  # raises, with the allowed moves
                current[tid] = dst
                row = rows.get(tid)
                if row is None:
                    row = rows[tid] = [dst, 0, 0, now, None, tid]
                else:
                    row[0] = dst
                if dst is TaskState.SCHEDULED:
                    row[1] += 1
                elif dst is TaskState.PREEMPTED:
                    row[2] += 1
                if t.error is not None:
                    row[4] = t.error
            updates = [(_VALUE[r[0]], *r[1:]) for r in rows.values()]
            conn.executemany(
                "UPDATE tasks SET state = ?, attempts = attempts + ?, "
                "preemptions = preemptions + ?, updated_at = ?, "
                "error = COALESCE(?, error) WHERE id = ?",
                updates,
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _states_of(self, ids: list[str]) -> dict[str, TaskState]:
        return {i: _STATE[v] for i, v in self._column_of("state", ids).items()}

    def _column_of(self, column: str, ids: list[str]) -> dict[str, Any]:
        """``column`` of each task of ``ids`` that exists, in chunks of 500
        (SQLite caps the parameters of one statement)."""
        out: dict[str, Any] = {}
        unique = list(dict.fromkeys(ids))
        for i in range(0, len(unique), 500):
            chunk = unique[i : i + 500]
            rows = self.conn.execute(
                f"SELECT id, {column} FROM tasks WHERE id IN ({','.join('?' * len(chunk))})", chunk
            ).fetchall()
            out.update(rows)
        return out

    # -- attempts and results ------------------------------------------------
    async def put_attempt(self, attempt: Attempt) -> None:
        await self.put_attempts([attempt])

    async def put_attempts(self, attempts: Sequence[Attempt]) -> None:
        if not attempts:
            return
        self._in_transaction(
            "INSERT OR REPLACE INTO attempts (task_id, number, body) VALUES (?, ?, ?)",
            [(a.task_id, a.number, a.model_dump_json()) for a in attempts],
        )

    async def put_results(self, results: Sequence[TaskResult]) -> None:
        if not results:
            return
        runs = self._column_of("run_id", [r.task_id for r in results])
        missing = [r.task_id for r in results if r.task_id not in runs]
        if missing:
            raise NotFound(f"cannot store a result for unknown task {missing[0]!r}")
        self._in_transaction(
            "INSERT OR REPLACE INTO results (task_id, run_id, success, reward, body) "
            "VALUES (?, ?, ?, ?, ?)",
            [(r.task_id, runs[r.task_id], int(r.success), r.reward, r.model_dump_json())
             for r in results],
        )  # fmt: skip

    def _in_transaction(self, sql: str, rows: list[tuple[object, ...]]) -> None:
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany(sql, rows)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    async def list_attempts(self, task_id: str) -> list[Attempt]:
        rows = self.conn.execute(
            "SELECT body FROM attempts WHERE task_id = ? ORDER BY number", (task_id,)
        ).fetchall()
        return [Attempt.model_validate_json(r[0]) for r in rows]

    async def put_result(self, result: TaskResult) -> None:
        await self.put_results([result])

    async def get_result(self, task_id: str) -> TaskResult:
        row = self.conn.execute("SELECT body FROM results WHERE task_id = ?", (task_id,)).fetchone()
        if row is None:
            raise NotFound(f"no result for task {task_id!r}")
        return TaskResult.model_validate_json(row[0])

    async def list_results(self, run_id: str) -> list[TaskResult]:
        rows = self.conn.execute(
            "SELECT r.body FROM results r JOIN tasks t ON t.id = r.task_id "
            "WHERE r.run_id = ? ORDER BY t.seq",
            (run_id,),
        ).fetchall()
        return [TaskResult.model_validate_json(r[0]) for r in rows]

    # -- the driver lease: one conditional upsert -----------------------------------
    async def claim_lease(
        self, run_id: str, owner: str, ttl_s: float, *, replaces: str | None = None
    ) -> Lease:
        now = time.time()
        took = self.conn.execute(
            "INSERT INTO leases (run_id, owner, expires_at) VALUES (?, ?, ?) "
            "ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner, "
            "expires_at = excluded.expires_at WHERE leases.owner = excluded.owner "
            "OR leases.owner = ? OR leases.expires_at < ?",
            (run_id, owner, now + ttl_s, replaces, now),
        ).rowcount
        lease = await self.get_lease(run_id)
        if lease is None or not took:
            raise held_by(lease or Lease(run_id, "?", now), now)
        return lease

    async def release_lease(self, run_id: str, owner: str) -> None:
        self.conn.execute("DELETE FROM leases WHERE run_id = ? AND owner = ?", (run_id, owner))

    async def get_lease(self, run_id: str) -> Lease | None:
        row = self.conn.execute(
            "SELECT owner, expires_at FROM leases WHERE run_id = ?", (run_id,)
        ).fetchone()
        return None if row is None else Lease(run_id, row[0], row[1])

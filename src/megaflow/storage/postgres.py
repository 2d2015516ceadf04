"""PostgreSQL metadata store, for control planes that share one database.

psycopg 3 in async mode over a connection pool: concurrent calls of one
process use separate connections, and several control-plane processes can
use the same database. Every write that reads before it writes takes row
locks first: ``transition_many`` locks the rows of its tasks with
``SELECT ... FOR UPDATE`` (in id order, so two batches never deadlock), and
``add_tasks`` locks the arrival counter row, which makes ``seq`` gapless and
in commit order. Rows are written in bulk: new tasks with ``COPY``, a batch
of transitions as one ``UPDATE ... FROM unnest(...)``.

Everything lives in one PostgreSQL schema (``megaflow`` by default), so
several deployments can share a database. The schema is versioned
(:mod:`megaflow.storage.postgres_schema`) and migrated on ``start()``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg import AsyncConnection, errors, sql
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from megaflow.core.errors import AlreadyExists, NotFound, StorageError
from megaflow.core.states import TaskState
from megaflow.core.tasks import Attempt, RunSpec, TaskRecord, TaskResult, TaskSpec
from megaflow.storage.abstract import MetadataStore, Transition, submission_ids
from megaflow.storage.lease import Lease, held_by
from megaflow.storage.postgres_schema import current_version, migrate
from megaflow.storage.sql_rows import TASK_COLS, task_record
from megaflow.storage.transition_plan import plan_transitions


class PostgresMetadataStore(MetadataStore):
    """``dsn`` is a libpq connection string or URI; libpq's ``PG*`` environment
    variables and ``~/.pgpass`` fill in what it leaves out (e.g. the password)."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "megaflow",
        min_connections: int = 1,
        max_connections: int = 10,
        connect_timeout_s: float = 10.0,
    ) -> None:
        self.dsn = dsn
        self.schema = schema
        self.min_connections = min_connections
        self.max_connections = max_connections
        self.connect_timeout_s = connect_timeout_s
        self._pool: AsyncConnectionPool[AsyncConnection[Any]] | None = None

    async def _configure(self, conn: AsyncConnection[Any]) -> None:
        await conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))

    async def start(self) -> None:
        if self._pool is not None:
            return
        pool: AsyncConnectionPool[AsyncConnection[Any]] = AsyncConnectionPool(
            self.dsn,
            min_size=self.min_connections,
            max_size=self.max_connections,
            kwargs={"autocommit": True, "application_name": f"megaflow-{self.schema}"[:63]},
            configure=self._configure,
            timeout=self.connect_timeout_s,
            open=False,
            name=f"megaflow-{self.schema}",
        )
        try:
            await pool.open(wait=True, timeout=self.connect_timeout_s)
            async with pool.connection() as conn:
                await migrate(conn, self.schema)
        except PoolTimeout as exc:
            await pool.close()
            raise StorageError(
                f"cannot connect to PostgreSQL within {self.connect_timeout_s:g} s "
                f"(dsn {_redact(self.dsn)}): is the server up and the dsn right?"
            ) from exc
        except BaseException:
            await pool.close()
            raise
        self._pool = pool

    async def stop(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()

    @asynccontextmanager
    async def _conn(self) -> AsyncIterator[AsyncConnection[Any]]:
        if self._pool is None:
            raise StorageError("PostgresMetadataStore is not started; call await store.start()")
        try:
            async with self._pool.connection() as conn:
                yield conn
        except PoolTimeout as exc:
            raise StorageError(f"no PostgreSQL connection free or reachable: {exc}") from exc
        except psycopg.OperationalError as exc:
            # the pool drops a broken connection; the next call gets a fresh one
            raise StorageError(f"PostgreSQL connection lost: {exc}") from exc

    async def _fetchall(self, query: Any, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        async with self._conn() as conn:
            cur = await conn.execute(query, args)
            return await cur.fetchall()

    async def schema_version(self) -> int:
        async with self._conn() as conn:
            return await current_version(conn)

    # -- runs ---------------------------------------------------------------
    async def create_run(self, run: RunSpec) -> None:
        try:
            async with self._conn() as conn:
                await conn.execute(
                    "INSERT INTO runs (id, name, created_at, spec) VALUES (%s, %s, %s, %s)",
                    (run.id, run.name, run.created_at, run.model_dump_json()),
                )
        except errors.UniqueViolation:
            raise AlreadyExists(f"run {run.id!r} already exists") from None

    async def get_run(self, run_id: str) -> RunSpec:
        rows = await self._fetchall("SELECT spec FROM runs WHERE id = %s", (run_id,))
        if not rows:
            raise NotFound(f"run {run_id!r} not found")
        return RunSpec.model_validate_json(rows[0][0])

    async def list_runs(self) -> list[RunSpec]:
        rows = await self._fetchall("SELECT spec FROM runs ORDER BY created_at, id")
        return [RunSpec.model_validate_json(r[0]) for r in rows]

    # -- tasks --------------------------------------------------------------
    async def add_tasks(self, tasks: Sequence[TaskSpec]) -> list[TaskRecord]:
        if not tasks:
            return []
        ids = submission_ids(tasks)
        now = time.time()
        try:
            async with self._conn() as conn, conn.transaction():
                cur = await conn.execute(
                    "SELECT value FROM counters WHERE name = 'task_seq' FOR UPDATE"
                )
                row = await cur.fetchone()
                last = int(row[0]) if row else 0
                records = [
                    TaskRecord(spec=t, state=TaskState.QUEUED, seq=last + i + 1, updated_at=now)
                    for i, t in enumerate(tasks)
                ]
                async with conn.cursor().copy(
                    "COPY tasks (id, run_id, seq, state, priority, updated_at, spec) FROM STDIN"
                ) as copy:
                    for r in records:
                        await copy.write_row(
                            (
                                r.spec.id,
                                r.spec.run_id,
                                r.seq,
                                r.state.value,
                                r.spec.priority,
                                now,
                                r.spec.model_dump_json(),
                            )
                        )
                await conn.execute(
                    "UPDATE counters SET value = %s WHERE name = 'task_seq'", (records[-1].seq,)
                )
        except errors.UniqueViolation:
            rows = await self._fetchall("SELECT id FROM tasks WHERE id = ANY(%s)", (ids,))
            found = {r[0] for r in rows}
            existing = next((i for i in ids if i in found), None)
            raise AlreadyExists(f"task id {existing!r} already exists") from None
        return records

    async def get_task(self, task_id: str) -> TaskRecord:
        rows = await self._fetchall(f"SELECT {TASK_COLS} FROM tasks WHERE id = %s", (task_id,))
        if not rows:
            raise NotFound(f"task {task_id!r} not found")
        return task_record(rows[0])

    async def list_tasks(
        self,
        run_id: str | None = None,
        states: Iterable[TaskState] | None = None,
        limit: int | None = None,
    ) -> list[TaskRecord]:
        where: list[sql.Composable] = []
        args: list[Any] = []
        if run_id is not None:
            where.append(sql.SQL("run_id = %s"))
            args.append(run_id)
        if states is not None:
            values = [TaskState(s).value for s in states]
            if not values:
                return []
            where.append(sql.SQL("state = ANY(%s)"))
            args.append(values)
        query: sql.Composable = sql.SQL(f"SELECT {TASK_COLS} FROM tasks")  # type: ignore[arg-type]
        if where:
            query += sql.SQL(" WHERE ") + sql.SQL(" AND ").join(where)
        query += sql.SQL(" ORDER BY seq")
        if limit is not None:
            query += sql.SQL(" LIMIT %s")
            args.append(int(limit))
        return [task_record(r) for r in await self._fetchall(query, args)]

    async def count_by_state(self, run_id: str | None = None) -> dict[TaskState, int]:
        if run_id is None:
            rows = await self._fetchall("SELECT state, COUNT(*) FROM tasks GROUP BY state")
        else:
            rows = await self._fetchall(
                "SELECT state, COUNT(*) FROM tasks WHERE run_id = %s GROUP BY state", (run_id,)
            )
        return {TaskState(s): int(n) for s, n in rows}

    async def transition_many(self, transitions: Sequence[Transition]) -> None:
        if not transitions:
            return
        ids = sorted({t.task_id for t in transitions})
        async with self._conn() as conn, conn.transaction():
            cur = await conn.execute(
                "SELECT id, state FROM tasks WHERE id = ANY(%s) ORDER BY id FOR UPDATE", (ids,)
            )
            current = {i: TaskState(s) for i, s in await cur.fetchall()}
            changes = plan_transitions(transitions, current)
            await conn.execute(
                "UPDATE tasks AS t SET state = u.state, attempts = t.attempts + u.da, "
                "preemptions = t.preemptions + u.dp, updated_at = %s, "
                "error = COALESCE(u.error, t.error) "
                "FROM unnest(%s::text[], %s::text[], %s::int[], %s::int[], %s::text[]) "
                "AS u(id, state, da, dp, error) WHERE t.id = u.id",
                (
                    time.time(),
                    [c.task_id for c in changes],
                    [c.dst.value for c in changes],
                    [c.attempts for c in changes],
                    [c.preemptions for c in changes],
                    [c.error for c in changes],
                ),
            )

    # -- attempts and results ------------------------------------------------
    async def put_attempt(self, attempt: Attempt) -> None:
        async with self._conn() as conn:
            await conn.execute(
                "INSERT INTO attempts (task_id, number, body) VALUES (%s, %s, %s) "
                "ON CONFLICT (task_id, number) DO UPDATE SET body = EXCLUDED.body",
                (attempt.task_id, attempt.number, attempt.model_dump_json()),
            )

    async def list_attempts(self, task_id: str) -> list[Attempt]:
        rows = await self._fetchall(
            "SELECT body FROM attempts WHERE task_id = %s ORDER BY number", (task_id,)
        )
        return [Attempt.model_validate_json(r[0]) for r in rows]

    async def put_result(self, result: TaskResult) -> None:
        async with self._conn() as conn:
            cur = await conn.execute(
                "INSERT INTO results (task_id, run_id, success, reward, body) "
                "SELECT id, run_id, %s, %s, %s FROM tasks WHERE id = %s "
                "ON CONFLICT (task_id) DO UPDATE SET run_id = EXCLUDED.run_id, "
                "success = EXCLUDED.success, reward = EXCLUDED.reward, body = EXCLUDED.body",
                (result.success, result.reward, result.model_dump_json(), result.task_id),
            )
            if cur.rowcount == 0:
                raise NotFound(f"cannot store a result for unknown task {result.task_id!r}")

    async def get_result(self, task_id: str) -> TaskResult:
        rows = await self._fetchall("SELECT body FROM results WHERE task_id = %s", (task_id,))
        if not rows:
            raise NotFound(f"no result for task {task_id!r}")
        return TaskResult.model_validate_json(rows[0][0])

    async def list_results(self, run_id: str) -> list[TaskResult]:
        rows = await self._fetchall(
            "SELECT r.body FROM results r JOIN tasks t ON t.id = r.task_id "
            "WHERE r.run_id = %s ORDER BY t.seq",
            (run_id,),
        )
        return [TaskResult.model_validate_json(r[0]) for r in rows]

    # -- the driver lease: one INSERT ... ON CONFLICT ... WHERE ---------------------
    async def claim_lease(
        self, run_id: str, owner: str, ttl_s: float, *, replaces: str | None = None
    ) -> Lease:
        now = time.time()
        took = await self._fetchall(
            "INSERT INTO leases (run_id, owner, expires_at) VALUES (%s, %s, %s) "
            "ON CONFLICT (run_id) DO UPDATE SET owner = EXCLUDED.owner, "
            "expires_at = EXCLUDED.expires_at WHERE leases.owner = EXCLUDED.owner "
            "OR leases.owner = %s::text OR leases.expires_at < %s RETURNING expires_at",
            (run_id, owner, now + ttl_s, replaces, now),
        )
        if took:
            return Lease(run_id, owner, float(took[0][0]))
        raise held_by(await self.get_lease(run_id) or Lease(run_id, "?", now), now)

    async def release_lease(self, run_id: str, owner: str) -> None:
        async with self._conn() as conn:
            await conn.execute(
                "DELETE FROM leases WHERE run_id = %s AND owner = %s", (run_id, owner)
            )

    async def get_lease(self, run_id: str) -> Lease | None:
        rows = await self._fetchall(
            "SELECT owner, expires_at FROM leases WHERE run_id = %s", (run_id,)
        )
        return Lease(run_id, rows[0][0], float(rows[0][1])) if rows else None


def _redact(dsn: str) -> str:
    """The dsn without its password, for error messages."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        parts = conninfo_to_dict(dsn)
    except Exception:
        return "<unparseable>"
    if "password" in parts:
        parts["password"] = "***"
    return make_conninfo(**{k: str(v) for k, v in parts.items()})

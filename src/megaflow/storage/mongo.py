"""MongoDB metadata store, on the pymongo async API.

One document per run, task, attempt and result; the task spec is kept as
JSON text so every spec round-trips exactly (BSON cannot hold integers
beyond 64 bits nor keys with ``$`` or ``.``). Indexes: tasks by
``(run_id, state)``, ``(state, seq)`` and unique ``seq``; results by
``(run_id, seq)``; attempts unique by ``(task_id, number)``. ``seq`` comes
from a counter document bumped with ``$inc``: increasing, but it may skip
numbers after a failed submission.

Multi-document transactions exist only on replica sets and sharded
clusters. With ``transactions="auto"`` (the default) the store uses them
there, and elsewhere (a standalone server, or a wire-protocol server such
as nx-27017 that reports itself as one) falls back to single-document
atomic writes with optimistic locking (:mod:`megaflow.storage.mongo_batch`).
The indexes and the schema version are set up by
:mod:`megaflow.storage.mongo_schema`.

Documents are only ever changed with ``update_one``/``bulk_write`` and
``$set``/``$inc``, never ``replace_one``: nx-27017 (0.8) loses the document
when ``replace_one(..., upsert=True)`` targets one that exists.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar

from pymongo import ASCENDING, AsyncMongoClient, ReturnDocument
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import BulkWriteError, DuplicateKeyError, PyMongoError

from megaflow.core.errors import AlreadyExists, NotFound, StorageError
from megaflow.core.states import TaskState
from megaflow.core.tasks import Attempt, RunSpec, TaskRecord, TaskResult, TaskSpec
from megaflow.storage.abstract import MetadataStore, Transition, submission_ids
from megaflow.storage.lease import Lease, held_by
from megaflow.storage.mongo_batch import Doc, Session, apply_transitions
from megaflow.storage.mongo_schema import prepare

TransactionMode = Literal["auto", "on", "off"]
_T = TypeVar("_T")
_P = ParamSpec("_P")
_Store = TypeVar("_Store", bound="MongoMetadataStore")


def _storage_errors(
    method: Callable[Concatenate[_Store, _P], Coroutine[Any, Any, _T]],
) -> Callable[Concatenate[_Store, _P], Coroutine[Any, Any, _T]]:
    """Report what pymongo raises (a lost server, a refused command) as ``StorageError``."""

    @functools.wraps(method)
    async def wrapper(self: _Store, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        try:
            return await method(self, *args, **kwargs)
        except PyMongoError as exc:
            raise StorageError(f"MongoDB {method.__name__} failed: {exc}") from exc

    return wrapper


def _record(doc: Doc) -> TaskRecord:
    return TaskRecord(
        spec=TaskSpec.model_validate_json(doc["spec"]),
        state=TaskState(doc["state"]),
        attempts=doc["attempts"],
        preemptions=doc["preemptions"],
        seq=doc["seq"],
        updated_at=doc["updated_at"],
        error=doc.get("error"),
    )


class MongoMetadataStore(MetadataStore):
    def __init__(
        self,
        uri: str,
        *,
        database: str = "megaflow",
        transactions: TransactionMode = "auto",
        connect_timeout_s: float = 10.0,
    ) -> None:
        self.uri = uri
        self.database = database
        self.transactions = transactions
        self.connect_timeout_s = connect_timeout_s
        self.uses_transactions = False
        """Whether batches run in multi-document transactions (known after ``start``)."""
        self._client: AsyncMongoClient[Doc] | None = None

    async def start(self) -> None:
        if self._client is not None:
            return
        timeout_ms = int(self.connect_timeout_s * 1000)
        client: AsyncMongoClient[Doc] = AsyncMongoClient(
            self.uri, serverSelectionTimeoutMS=timeout_ms, connectTimeoutMS=timeout_ms
        )
        try:
            hello = await client.admin.command("hello")
            replicated = "setName" in hello or hello.get("msg") == "isdbgrid"
            self.uses_transactions = self.transactions == "on" or (
                self.transactions == "auto" and replicated
            )
            self._client = client
            await prepare(client[self.database])
        except BaseException as exc:
            self._client = None
            await client.close()
            if isinstance(exc, PyMongoError):
                raise StorageError(f"cannot use MongoDB at {self.uri}: {exc}") from exc
            raise

    async def stop(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    def _coll(self, name: str) -> AsyncCollection[Doc]:
        if self._client is None:
            raise StorageError("MongoMetadataStore is not started; call await store.start()")
        return self._client[self.database][name]

    async def _atomic(self, body: Callable[[Session], Awaitable[_T]]) -> _T:
        """Run ``body`` in a transaction when the server has them, else without."""
        if not self.uses_transactions:
            return await body(None)
        assert self._client is not None
        async with self._client.start_session() as session:
            return await session.with_transaction(body)

    @_storage_errors
    async def schema_version(self) -> int:
        found = await self._coll("meta").find_one({"_id": "schema"})
        return int(found["version"]) if found else 0

    # -- runs ---------------------------------------------------------------
    @_storage_errors
    async def create_run(self, run: RunSpec) -> None:
        doc = {"_id": run.id, "name": run.name, "created_at": run.created_at,
               "spec": run.model_dump_json()}  # fmt: skip
        try:
            await self._coll("runs").insert_one(doc)
        except DuplicateKeyError:
            raise AlreadyExists(f"run {run.id!r} already exists") from None

    @_storage_errors
    async def get_run(self, run_id: str) -> RunSpec:
        doc = await self._coll("runs").find_one({"_id": run_id})
        if doc is None:
            raise NotFound(f"run {run_id!r} not found")
        return RunSpec.model_validate_json(doc["spec"])

    @_storage_errors
    async def list_runs(self) -> list[RunSpec]:
        cursor = self._coll("runs").find({}, sort=[("created_at", ASCENDING), ("_id", ASCENDING)])
        return [RunSpec.model_validate_json(d["spec"]) async for d in cursor]

    # -- tasks --------------------------------------------------------------
    @_storage_errors
    async def add_tasks(self, tasks: Sequence[TaskSpec]) -> list[TaskRecord]:
        if not tasks:
            return []
        ids = submission_ids(tasks)
        return await self._atomic(lambda s: self._add_tasks(tasks, ids, s))

    async def _add_tasks(
        self, tasks: Sequence[TaskSpec], ids: list[str], s: Session
    ) -> list[TaskRecord]:
        coll = self._coll("tasks")
        await self._refuse_existing(ids, s)
        counter = await self._coll("counters").find_one_and_update(
            {"_id": "task_seq"}, {"$inc": {"value": len(ids)}},
            upsert=True, return_document=ReturnDocument.AFTER, session=s,
        )  # fmt: skip
        if counter is None:  # cannot happen with upsert=True; keeps the type checker honest
            raise StorageError("the task_seq counter could not be read")
        first = int(counter["value"]) - len(ids) + 1
        now = time.time()
        records = [
            TaskRecord(spec=t, state=TaskState.QUEUED, seq=first + i, updated_at=now)
            for i, t in enumerate(tasks)
        ]
        docs = [
            {
                "_id": r.spec.id,
                "run_id": r.spec.run_id,
                "seq": r.seq,
                "state": r.state.value,
                "priority": r.spec.priority,
                "attempts": 0,
                "preemptions": 0,
                "updated_at": now,
                "error": None,
                "rev": 0,
                "spec": r.spec.model_dump_json(),
            }
            for r in records
        ]
        try:
            await coll.insert_many(docs, ordered=True, session=s)
        except BulkWriteError as exc:
            if s is None:  # no transaction to abort: remove what this call inserted
                await coll.delete_many(
                    {"_id": {"$in": ids}, "seq": {"$gte": first, "$lt": first + len(ids)}}
                )
            if any(e.get("code") == 11000 for e in exc.details.get("writeErrors", [])):
                await self._refuse_existing(ids, s)
                raise AlreadyExists(f"a task of this submission already exists: {exc}") from None
            raise StorageError(f"inserting {len(ids)} tasks failed: {exc}") from exc
        return records

    async def _refuse_existing(self, ids: list[str], s: Session) -> None:
        found = {
            d["_id"]
            async for d in self._coll("tasks").find({"_id": {"$in": ids}}, {"_id": 1}, session=s)
        }
        if found:
            existing = next(i for i in ids if i in found)
            raise AlreadyExists(f"task id {existing!r} already exists")

    @_storage_errors
    async def get_task(self, task_id: str) -> TaskRecord:
        doc = await self._coll("tasks").find_one({"_id": task_id})
        if doc is None:
            raise NotFound(f"task {task_id!r} not found")
        return _record(doc)

    @_storage_errors
    async def list_tasks(
        self,
        run_id: str | None = None,
        states: Iterable[TaskState] | None = None,
        limit: int | None = None,
    ) -> list[TaskRecord]:
        query: Doc = {}
        if run_id is not None:
            query["run_id"] = run_id
        if states is not None:
            values = [TaskState(s).value for s in states]
            if not values:
                return []
            query["state"] = {"$in": values}
        if limit == 0:
            return []  # pymongo reads a limit of 0 as "no limit"
        cursor = self._coll("tasks").find(query, sort=[("seq", ASCENDING)])
        if limit is not None:
            cursor = cursor.limit(int(limit))
        return [_record(d) async for d in cursor]

    @_storage_errors
    async def count_by_state(self, run_id: str | None = None) -> dict[TaskState, int]:
        pipeline: list[Doc] = [{"$group": {"_id": "$state", "n": {"$sum": 1}}}]
        if run_id is not None:
            pipeline.insert(0, {"$match": {"run_id": run_id}})
        cursor = await self._coll("tasks").aggregate(pipeline)
        return {TaskState(d["_id"]): int(d["n"]) async for d in cursor}

    @_storage_errors
    async def transition_many(self, transitions: Sequence[Transition]) -> None:
        if transitions:
            tasks = self._coll("tasks")
            await self._atomic(lambda s: apply_transitions(tasks, transitions, s))

    # -- attempts and results ------------------------------------------------
    @_storage_errors
    async def put_attempt(self, attempt: Attempt) -> None:
        doc = {"task_id": attempt.task_id, "number": attempt.number,
               "body": attempt.model_dump_json()}  # fmt: skip
        # update with $set, not replace_one: see the module docstring on nx-27017
        await self._coll("attempts").update_one(
            {"_id": f"{attempt.task_id}#{attempt.number}"}, {"$set": doc}, upsert=True
        )

    @_storage_errors
    async def list_attempts(self, task_id: str) -> list[Attempt]:
        cursor = self._coll("attempts").find({"task_id": task_id}, sort=[("number", ASCENDING)])
        return [Attempt.model_validate_json(d["body"]) async for d in cursor]

    @_storage_errors
    async def put_result(self, result: TaskResult) -> None:
        task = await self._coll("tasks").find_one({"_id": result.task_id}, {"run_id": 1, "seq": 1})
        if task is None:
            raise NotFound(f"cannot store a result for unknown task {result.task_id!r}")
        doc = {"run_id": task["run_id"], "seq": task["seq"], "success": result.success,
               "reward": result.reward, "body": result.model_dump_json()}  # fmt: skip
        await self._coll("results").update_one({"_id": result.task_id}, {"$set": doc}, upsert=True)

    @_storage_errors
    async def get_result(self, task_id: str) -> TaskResult:
        doc = await self._coll("results").find_one({"_id": task_id})
        if doc is None:
            raise NotFound(f"no result for task {task_id!r}")
        return TaskResult.model_validate_json(doc["body"])

    @_storage_errors
    async def list_results(self, run_id: str) -> list[TaskResult]:
        cursor = self._coll("results").find({"run_id": run_id}, sort=[("seq", ASCENDING)])
        return [TaskResult.model_validate_json(d["body"]) async for d in cursor]

    # -- the driver lease: a conditional upsert -------------------------------------
    @_storage_errors
    async def claim_lease(
        self, run_id: str, owner: str, ttl_s: float, *, replaces: str | None = None
    ) -> Lease:
        now = time.time()
        owners = [owner] if replaces is None else [owner, replaces]
        mine = {"$or": [{"owner": {"$in": owners}}, {"expires_at": {"$lt": now}}]}
        try:  # a lease held by another matches nothing: the upsert's insert hits its _id
            await self._coll("leases").update_one(
                {"_id": run_id, **mine},
                {"$set": {"owner": owner, "expires_at": now + ttl_s}},
                upsert=True,
            )
        except DuplicateKeyError:
            raise held_by(await self.get_lease(run_id) or Lease(run_id, "?", now), now) from None
        lease = await self.get_lease(run_id)
        if lease is None or lease.owner != owner:  # taken over between the two calls
            raise held_by(lease or Lease(run_id, "?", now), now)
        return lease

    @_storage_errors
    async def release_lease(self, run_id: str, owner: str) -> None:
        await self._coll("leases").delete_one({"_id": run_id, "owner": owner})

    @_storage_errors
    async def get_lease(self, run_id: str) -> Lease | None:
        doc = await self._coll("leases").find_one({"_id": run_id})
        return None if doc is None else Lease(run_id, doc["owner"], float(doc["expires_at"]))

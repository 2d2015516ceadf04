"""A batch of transitions on MongoDB without a transaction: optimistic locking.

On a server without multi-document transactions (a standalone server, or
nx-27017) :func:`apply_transitions` validates the whole batch before
writing anything, then updates each task only if its revision is still the
one it read, so concurrent schedulers never lose an update. If any task
changed in between, the updates already made are undone and the batch
fails with ``InvalidTransition``; readers may see it half-applied for a
moment, which a transaction would hide. Inside a transaction (``session``
given) the same writes run and an abort undoes them.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

from pymongo import UpdateOne
from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.collection import AsyncCollection

from megaflow.core.errors import InvalidTransition, StorageError
from megaflow.core.states import TaskState
from megaflow.storage.abstract import Transition
from megaflow.storage.transition_plan import plan_transitions

Doc = dict[str, Any]
Session = AsyncClientSession | None


async def apply_transitions(
    coll: AsyncCollection[Doc], transitions: Sequence[Transition], s: Session
) -> None:
    """Apply ``transitions`` to the tasks in ``coll``, all or none."""
    ids = list(dict.fromkeys(t.task_id for t in transitions))
    fields = {"state": 1, "rev": 1, "error": 1, "updated_at": 1}
    seen = {d["_id"]: d async for d in coll.find({"_id": {"$in": ids}}, fields, session=s)}
    changes = plan_transitions(transitions, {i: TaskState(d["state"]) for i, d in seen.items()})
    token, now = uuid.uuid4().hex, time.time()
    ops = []
    for c in changes:
        update: Doc = {"state": c.dst.value, "updated_at": now, "batch": token,
                       "rev": seen[c.task_id]["rev"] + 1}  # fmt: skip
        if c.error is not None:
            update["error"] = c.error
        ops.append(
            UpdateOne(
                {"_id": c.task_id, "rev": seen[c.task_id]["rev"]},
                {
                    "$set": update,
                    "$inc": {"attempts": c.attempts, "preemptions": c.preemptions},
                },
            )
        )
    done = await coll.bulk_write(ops, ordered=True, session=s)
    if done.matched_count == len(ops):
        return
    if s is None:  # no transaction to abort: undo what this batch wrote
        undo = [
            UpdateOne(
                {"_id": c.task_id, "batch": token},
                {
                    "$set": {
                        "state": c.src.value,
                        "error": seen[c.task_id].get("error"),
                        "updated_at": seen[c.task_id]["updated_at"],
                        "batch": None,
                        "rev": seen[c.task_id]["rev"] + 2,
                    },
                    "$inc": {"attempts": -c.attempts, "preemptions": -c.preemptions},
                },
            )
            for c in changes
        ]
        undone = await coll.bulk_write(undo, ordered=True)
        if undone.matched_count != done.matched_count:
            raise StorageError(
                f"a batch of {len(changes)} transitions met concurrent writers and could "
                "only be undone in part; read the tasks again before going on"
            )
    raise InvalidTransition(
        f"{len(ops) - done.matched_count} of {len(ops)} tasks changed while the batch was "
        "being applied (another scheduler); nothing was applied, read them again"
    )

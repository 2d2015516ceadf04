"""Rebuild the task queue from the metadata store after a restart.

The metadata store is the source of truth; the queue is a cache of the
tasks that wait. After a crash every non-terminal task goes back to the
queue: tasks that were in flight (SCHEDULED .. GRADING) had their attempt
lost with the process, so that attempt is recorded as ``infra_lost`` and the
task passes through RETRYING back to QUEUED. Terminal tasks are never
touched, so nothing runs twice and nothing is counted twice.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from megaflow.core.states import ACTIVE_STATES, TaskState
from megaflow.core.tasks import Attempt, ErrorKind
from megaflow.storage.abstract import MetadataStore, QueuedTask, TaskQueue, Transition

LOST_ON_RESTART = "attempt lost: the control plane stopped while the task was in flight"
"""The error of an attempt recorded here; its ``ended_at`` is when the run was taken
up again (the dashboard's throughput counts from the latest)."""
_LOST = LOST_ON_RESTART


@dataclass(frozen=True)
class RecoveryReport:
    requeued: int
    lost_in_flight: int


async def recover_queue(
    store: MetadataStore, queue: TaskQueue, run_id: str | None = None
) -> RecoveryReport:
    """Re-queue every non-terminal task of ``run_id`` (or of all runs)."""
    in_flight = await store.list_tasks(run_id, states=ACTIVE_STATES)
    now = time.time()
    for rec in in_flight:
        await store.put_attempt(
            Attempt(
                task_id=rec.id,
                number=max(rec.attempts, 1),
                started_at=rec.updated_at,
                ended_at=now,
                error_kind=ErrorKind.INFRA_LOST,
                error=_LOST,
            )
        )
    await store.transition_many(
        [Transition(r.id, TaskState.RETRYING, expect=r.state, error=_LOST) for r in in_flight]
    )
    waiting = await store.list_tasks(run_id, states=[TaskState.RETRYING, TaskState.PREEMPTED])
    await store.transition_many([Transition(r.id, TaskState.QUEUED) for r in waiting])
    queued = await store.list_tasks(run_id, states=[TaskState.QUEUED])
    await queue.push([QueuedTask(spec=r.spec, seq=r.seq) for r in queued])
    return RecoveryReport(requeued=len(queued), lost_in_flight=len(in_flight))

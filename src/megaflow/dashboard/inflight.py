"""Where tasks stand across every run right now, from the metadata store alone.

The sandboxes and scheduler pages read a process's live figures from its
Prometheus metrics (:mod:`megaflow.dashboard.live`), which the quickstart
does not export. What the store knows needs no metrics and is shown on both
pages: the tasks waiting to be placed (:func:`queued_by_type`) and the tasks
in flight (:func:`in_flight`: scheduled, starting, running or grading; from
starting on, each holds a sandbox of its own). A task in flight whose run's
driver is gone (:mod:`megaflow.storage.lease`) is stuck in its state with no
sandbox behind it: it is listed, marked, and left out of the live counts,
so the counts say what is really running.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from megaflow.core.errors import NotFound
from megaflow.core.states import TaskState
from megaflow.dashboard.summary import type_of
from megaflow.storage.abstract import MetadataStore
from megaflow.storage.lease import driver_lease, lease_ended

IN_FLIGHT = (TaskState.SCHEDULED, TaskState.STARTING, TaskState.RUNNING, TaskState.GRADING)
MAX_ROWS = 200
"""The in-flight tasks listed (the counts are over all of them)."""


async def queued_by_type(meta: MetadataStore) -> dict[str, Any]:
    """Tasks waiting to be placed (state QUEUED or RETRYING) under a live driver, by task
    type and by run; ``stuck`` counts those of runs whose driver is gone (nothing will
    place them until the run is resumed)."""
    waiting = await meta.list_tasks(None, states=[TaskState.QUEUED, TaskState.RETRYING])
    gone = {run: await _driver_gone(meta, run) for run in {r.spec.run_id for r in waiting}}
    live = [rec for rec in waiting if not gone[rec.spec.run_id]]
    by_type = Counter(type_of(rec) for rec in live)
    by_run = Counter(rec.spec.run_id for rec in live)
    stuck = len(waiting) - len(live)
    return {"by_type": dict(by_type), "by_run": dict(by_run), "total": len(live), "stuck": stuck}


async def _driver_gone(meta: MetadataStore, run_id: str) -> bool:
    """Whether the driver of ``run_id`` is known to be gone (no lease: not known)."""
    try:
        job = (await meta.get_run(run_id)).labels.get("job", run_id)
    except NotFound:
        return False
    lease = await driver_lease(meta, job)
    return lease is not None and lease_ended(lease)


async def in_flight(meta: MetadataStore, now: float | None = None) -> dict[str, Any]:
    """Tasks scheduled, starting, running or grading: counts by state of those whose driver
    is alive (``live``), how many are stuck under a driver that is gone (``stuck``), and
    up to :data:`MAX_ROWS` of them, oldest state first, each with its run, state, seconds
    in that state and attempt number."""
    now = time.time() if now is None else now
    records = await meta.list_tasks(None, states=list(IN_FLIGHT))
    gone = {run: await _driver_gone(meta, run) for run in {r.spec.run_id for r in records}}
    live = Counter(r.state.value for r in records if not gone[r.spec.run_id])
    rows = [
        {
            "run": rec.spec.run_id,
            "task": rec.id,
            "short_id": rec.id.removeprefix(rec.spec.run_id + "/"),
            "state": rec.state.value,
            "since_s": max(0.0, now - rec.updated_at),
            "attempt": rec.attempts,
            "driver_gone": gone[rec.spec.run_id],
        }
        for rec in sorted(records, key=lambda r: r.updated_at)[:MAX_ROWS]
    ]
    return {
        "live": {s.value: live.get(s.value, 0) for s in IN_FLIGHT},
        "live_total": sum(live.values()),
        "stuck": sum(1 for r in records if gone[r.spec.run_id]),
        "total": len(records),
        "tasks": rows,
    }

"""A run's figures as the runs page and the run page's header show them.

Read from the metadata store on each call, nothing cached. A run's figures
count graded samples only (tasks that ended SUCCEEDED): the resolved rate is
the share of them the agent solved, the reward mean and spread are over
them, and are kept apart per task type (``by_type``: a train run's held-out
figures are not mixed with its rollouts'). Where each task stands is counted
by outcome (:mod:`megaflow.core.outcomes`: ``resolved``, ``agent error``,
``running``...), never by the state ``succeeded`` beside an error count, so
a page does not read "succeeded 352" next to "agent error 6". Throughput is
the figure `megaflow run` prints: done tasks per second of the run's latest
start, counting the tasks that ended since it (:func:`latest_start`: the run's
creation, or its latest resume), so a resumed run's does not count the time
it stood still; cancelled tasks are ended but no work, so they count in
neither (the bar shows them apart). A run is
labelled with its arm (``main`` or ``control``) and its job, so a negative
control's "resolved share 0.0%" reads as the control it is, with what the
job expects of it.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from typing import Any

from megaflow.core.outcomes import is_error, outcome, outcome_order
from megaflow.core.states import TaskState
from megaflow.core.tasks import RunSpec, TaskRecord, TaskResult
from megaflow.dashboard.progress import progress_by_type
from megaflow.storage.abstract import MetadataStore
from megaflow.storage.lease import driver_lease, lease_ended
from megaflow.storage.recovery import LOST_ON_RESTART


def type_of(rec: TaskRecord) -> str:
    return rec.spec.type.value if rec.spec.type is not None else "eval"


def by_task(results: list[TaskResult]) -> dict[str, TaskResult]:
    return {r.task_id: r for r in results}


def error_kind_of(rec: TaskRecord, res: TaskResult | None) -> str | None:
    """The result's error kind; for a task that ended unsuccessfully without a result, its
    state."""
    if res is not None:
        return str(res.error_kind) if res.error_kind is not None else None
    if rec.state.terminal and rec.state is not TaskState.SUCCEEDED:
        return rec.state.value
    return None


def _error_kinds(records: list[TaskRecord], results: dict[str, TaskResult]) -> dict[str, int]:
    kinds = Counter(error_kind_of(rec, results.get(rec.id)) for rec in records)
    return {k: n for k, n in kinds.items() if k is not None}


def _figures(records: list[TaskRecord], results: dict[str, TaskResult]) -> dict[str, Any]:
    """Graded figures of some tasks: graded count, resolved, resolved rate, reward mean
    and spread (graded tasks only: an ungraded task has no reward)."""
    graded = [results[r.id] for r in records if r.state is TaskState.SUCCEEDED and r.id in results]
    rewards = [g.reward for g in graded]
    resolved = sum(1 for g in graded if g.success)
    return {
        "tasks": len(records),
        "graded": len(graded),
        "resolved": resolved,
        "resolved_rate": resolved / len(graded) if graded else None,
        # the command line's "resolved share" (core/outcomes.py): over every task
        "resolved_share": resolved / len(records) if graded else None,
        "reward_mean": statistics.fmean(rewards) if rewards else None,
        "reward_std": statistics.pstdev(rewards)
        if len(rewards) > 1
        else (0.0 if rewards else None),
    }


def _arm(run: RunSpec) -> dict[str, Any]:
    """The run's arm and job, and for a control arm the most the job lets it resolve."""
    arm = run.labels.get("arm")
    expect = run.config.get("expect")
    limit = expect.get("max_control_resolved") if isinstance(expect, dict) else None
    return {
        "arm": arm,
        "job": run.labels.get("job"),
        "control_limit": limit if arm == "control" else None,
    }


async def latest_start(meta: MetadataStore, run: RunSpec, records: list[TaskRecord]) -> float:
    """When the run's driver last took it up: its creation, or the latest resume. A resume
    records each attempt the stop left in flight as lost (``storage.recovery``), ended
    at the moment of the resume; only tasks tried again or queued again can hold one,
    so only their attempts are read. A resume that found nothing in flight leaves no
    trace: the run's creation is then the start."""
    again = [r for r in records if r.attempts > 1 or (r.attempts and r.state is TaskState.QUEUED)]
    resumed = [
        a.ended_at
        for r in again
        for a in await meta.list_attempts(r.id)
        if a.error == LOST_ON_RESTART and a.ended_at is not None
    ]
    return max([run.created_at, *resumed])


def throughput(records: list[TaskRecord], since: float, now: float) -> float:
    """Tasks done (ended, not cancelled) since ``since`` per second since it, up to the
    last one's end once every task has ended (``now`` before): what `megaflow run`
    prints for the tasks its process ran over its time."""
    ended = [r.updated_at for r in records if r.state.terminal and r.updated_at >= since]
    done = sum(
        1
        for r in records
        if r.state.terminal and r.state is not TaskState.CANCELLED and r.updated_at >= since
    )
    finished = all(r.state.terminal for r in records) and ended
    end = max(ended) if finished else now
    return done / max(end - since, 1e-9)


def _summary(
    run: RunSpec, records: list[TaskRecord], results: dict[str, TaskResult], since: float
) -> dict[str, Any]:
    counts = Counter(r.state.value for r in records)
    done = sum(1 for r in records if r.state.terminal)
    cancelled = counts.get(TaskState.CANCELLED.value, 0)  # ended, but no work done
    by_type: dict[str, list[TaskRecord]] = {}
    for rec in records:
        by_type.setdefault(type_of(rec), []).append(rec)
    outcomes = Counter(outcome(r.state, results.get(r.id)) for r in records)
    progress = progress_by_type(run, dict(sorted(by_type.items())))  # totals planned if known
    return {
        "id": run.id,
        "name": run.name,
        "created_at": run.created_at,
        **_arm(run),
        "states": dict(counts),
        "total": sum(p["total"] for p in progress.values()),
        "progress": progress,
        "done": done,
        "cancelled": cancelled,
        **_figures(records, results),
        "throughput": throughput(records, since, time.time()),
        "started_at": since,
        "errors": _error_kinds(records, results),
        "outcomes": {k: n for k, n in outcomes.items() if is_error(k)},
        "by_outcome": dict(sorted(outcomes.items(), key=lambda kv: outcome_order(kv[0]))),
        "by_type": {t: _figures(recs, results) for t, recs in sorted(by_type.items())},
    }


async def _driver(meta: MetadataStore, run: RunSpec, records: list[TaskRecord]) -> str | None:
    """``gone`` when the run has unfinished tasks and its driver's lease (its job's, or for a
    submitted run the cluster scheduler service's) has ended or its process on this host is
    dead (core/outcomes.py's "driver gone"), ``alive`` while the lease holds; None when
    nothing is unfinished or no driver leased the run (an older store)."""
    if all(r.state.terminal for r in records):
        return None
    lease = await driver_lease(meta, run.labels.get("job", run.id))
    if lease is None:
        return None
    return "gone" if lease_ended(lease) else "alive"


async def _summarised(meta: MetadataStore, run: RunSpec) -> dict[str, Any]:
    records = await meta.list_tasks(run.id)
    since = await latest_start(meta, run, records)
    view = _summary(run, records, by_task(await meta.list_results(run.id)), since)
    view["driver"] = await _driver(meta, run, records)
    return view


async def run_summaries(meta: MetadataStore) -> list[dict[str, Any]]:
    """Every run, newest first, with its state counts and figures."""
    return [await _summarised(meta, run) for run in reversed(await meta.list_runs())]


async def run_summary(meta: MetadataStore, run_id: str) -> dict[str, Any]:
    return await _summarised(meta, await meta.get_run(run_id))

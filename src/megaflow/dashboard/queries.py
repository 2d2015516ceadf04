"""What the dashboard's pages show, read from the stores on each call.

Each function takes the stores and returns plain JSON-ready dicts; nothing is
cached, so a page always shows what the stores hold now. A run's figures
count graded samples only (tasks that ended SUCCEEDED): the resolved rate is
the share of them the agent solved, the reward mean and spread are over
them, and are kept apart per task type (``by_type``: a train run's held-out
figures are not mixed with its rollouts'). Throughput is finished tasks per
second since the run was created; cancelled tasks are done but not work,
so they count in neither (the bar shows them apart).
A task's time is the sum of its result's stage times (sandbox start,
preparation, agent, grading: :data:`DURATION_PARTS`). A run's task list is
paged, sorted and searched here (:func:`run_tasks`), so a run of thousands
of tasks sends one page; each row carries its id relative to the run. The
trajectory page's data is :mod:`megaflow.dashboard.trajectories`.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import Counter
from typing import Any

from megaflow.core.errors import InvalidInput, NotFound
from megaflow.core.outcomes import is_error, outcome
from megaflow.core.states import TaskState
from megaflow.core.tasks import RunSpec, TaskRecord, TaskResult
from megaflow.dashboard.attempts import attempt_trajectories
from megaflow.dashboard.progress import progress_by_type
from megaflow.storage.abstract import ArtifactStore, MetadataStore
from megaflow.storage.lease import driver_lease, lease_ended

HISTOGRAM_BINS = 10
DURATION_PARTS = ("sandbox_start_s", "prepare_s", "agent_s", "grade_s")
"""The stages of an attempt whose times add up to the task's time."""


def _duration(res: TaskResult | None) -> float | None:
    if res is None:
        return None
    parts = [res.metrics[k] for k in DURATION_PARTS if k in res.metrics]
    return sum(parts) if parts else None


def _results(results: list[TaskResult]) -> dict[str, TaskResult]:
    return {r.task_id: r for r in results}


def _error_kind(rec: TaskRecord, res: TaskResult | None) -> str | None:
    """The result's error kind; for a task that ended unsuccessfully without a result, its
    state."""
    if res is not None:
        return str(res.error_kind) if res.error_kind is not None else None
    if rec.state.terminal and rec.state is not TaskState.SUCCEEDED:
        return rec.state.value
    return None


def _error_kinds(records: list[TaskRecord], results: dict[str, TaskResult]) -> dict[str, int]:
    kinds = Counter(_error_kind(rec, results.get(rec.id)) for rec in records)
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


def _summary(
    run: RunSpec, records: list[TaskRecord], results: dict[str, TaskResult]
) -> dict[str, Any]:
    counts = Counter(r.state.value for r in records)
    done = sum(1 for r in records if r.state.terminal)
    cancelled = counts.get(TaskState.CANCELLED.value, 0)  # ended, but no work done
    finished = [g.finished_at for g in results.values()]
    end = max(finished) if done == len(records) and finished else time.time()
    elapsed = max(end - run.created_at, 1e-9)
    by_type: dict[str, list[TaskRecord]] = {}
    for rec in records:
        by_type.setdefault(_task_type(rec), []).append(rec)
    outcomes = Counter(outcome(r.state, results.get(r.id)) for r in records)
    progress = progress_by_type(run, dict(sorted(by_type.items())))  # totals planned if known
    return {
        "id": run.id,
        "name": run.name,
        "created_at": run.created_at,
        "states": dict(counts),
        "total": sum(p["total"] for p in progress.values()),
        "progress": progress,
        "done": done,
        "cancelled": cancelled,
        **_figures(records, results),
        "throughput": (done - cancelled) / elapsed,
        "errors": _error_kinds(records, results),
        "outcomes": {k: n for k, n in outcomes.items() if is_error(k)},
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
    view = _summary(run, records, _results(await meta.list_results(run.id)))
    view["driver"] = await _driver(meta, run, records)
    return view


async def run_summaries(meta: MetadataStore) -> list[dict[str, Any]]:
    """Every run, newest first, with its state counts and figures."""
    return [await _summarised(meta, run) for run in reversed(await meta.list_runs())]


async def run_summary(meta: MetadataStore, run_id: str) -> dict[str, Any]:
    return await _summarised(meta, await meta.get_run(run_id))


def histogram(
    values: list[float], bins: int = HISTOGRAM_BINS, span: tuple[float, float] | None = None
) -> dict[str, list[float]]:
    """Equal-width bins over ``values`` (and ``span``, widened to hold them): left edges and
    counts; empty for no values. Equal values get one bin of width 1 centred on them."""
    if not values:
        return {"edges": [], "counts": []}
    lo, hi = min(values), max(values)
    if span is not None:
        lo, hi = min(lo, span[0]), max(hi, span[1])
    if hi == lo:
        lo, hi, bins = lo - 0.5, lo + 0.5, 1
    width = (hi - lo) / bins
    counts = [0.0] * bins
    for v in values:
        counts[min(int((v - lo) / width), bins - 1)] += 1
    return {"edges": [lo + i * width for i in range(bins)], "counts": counts}


def _task_type(rec: TaskRecord) -> str:
    return rec.spec.type.value if rec.spec.type is not None else "eval"


PAGE_SIZE = 50
SORT_KEYS = ("id", "state", "type", "attempts", "outcome", "reward", "duration_s")
"""The columns a run's task list sorts by (a leading ``-`` sorts descending)."""


def _short(run_id: str, task_id: str) -> str:
    """A task's id relative to its run (the run prefix is in the page's title)."""
    prefix = run_id + "/"
    return task_id[len(prefix) :] if task_id.startswith(prefix) else task_id


def _sorted(rows: list[dict[str, Any]], sort: str) -> list[dict[str, Any]]:
    key = sort.lstrip("-")
    if key not in SORT_KEYS:
        raise InvalidInput(f"sort: unknown column {key!r}; one of {', '.join(SORT_KEYS)}")
    present = [r for r in rows if r[key] is not None]
    missing = [r for r in rows if r[key] is None]  # no figure: last either way
    present.sort(key=lambda r: r[key], reverse=sort.startswith("-"))
    return present + missing


async def run_tasks(
    meta: MetadataStore,
    run_id: str,
    *,
    state: str | None = None,
    task_type: str | None = None,
    error_kind: str | None = None,
    search: str | None = None,
    sort: str = "id",
    page: int = 1,
    per_page: int = PAGE_SIZE,
) -> dict[str, Any]:
    """A run's tasks, filtered by state, type, error kind and a search in id and error
    (case-insensitive), sorted, one page of them; the reward and time histograms are over
    every task that matched, not only the page."""
    await meta.get_run(run_id)
    if page < 1 or not 1 <= per_page <= 1000:
        raise InvalidInput("page must be >= 1 and per_page between 1 and 1000")
    results = _results(await meta.list_results(run_id))
    needle = (search or "").strip().lower()
    rows: list[dict[str, Any]] = []
    for rec in await meta.list_tasks(run_id):
        res = results.get(rec.id)
        row: dict[str, Any] = {
            "id": rec.id,
            "short_id": _short(run_id, rec.id),
            "state": rec.state.value,
            "type": _task_type(rec),
            "attempts": rec.attempts,
            "outcome": outcome(rec.state, res),
            "success": res.success if res is not None else None,
            "reward": res.reward if res is not None and rec.state is TaskState.SUCCEEDED else None,
            "duration_s": _duration(res),
            "error_kind": _error_kind(rec, res),
            "error": (res.error if res is not None else None) or rec.error,
        }
        if state and row["state"] != state:
            continue
        if task_type and row["type"] != task_type:
            continue
        if error_kind and row["error_kind"] != error_kind:
            continue
        if needle and needle not in f"{rec.id}\n{row['error'] or ''}".lower():
            continue
        rows.append(row)
    rewards = [r["reward"] for r in rows if r["reward"] is not None]
    times = [r["duration_s"] for r in rows if r["duration_s"] is not None]
    ordered = _sorted(rows, sort)
    pages = max(1, -(-len(ordered) // per_page))
    return {
        "run": run_id,
        "tasks": ordered[(page - 1) * per_page : page * per_page],
        "matched": len(ordered),
        "page": page,
        "pages": pages,
        "per_page": per_page,
        "sort": sort,
        "reward_histogram": histogram(rewards, span=(0.0, 1.0)),
        "time_histogram": histogram(times),
    }


async def _text(artifacts: ArtifactStore, key: str | None) -> str | None:
    if key is None:
        return None
    try:
        return (await artifacts.get(key)).decode("utf-8", errors="replace")
    except NotFound:
        return None


async def task_detail(
    meta: MetadataStore, artifacts: ArtifactStore, task_id: str
) -> dict[str, Any]:
    """One task: its outcome and error message (the result's, else the record's), attempts,
    result, grade report and patch."""
    rec = await meta.get_task(task_id)
    try:
        res: TaskResult | None = await meta.get_result(task_id)
    except NotFound:
        res = None
    grade_text = await _text(artifacts, res.artifacts.get("grade") if res else None)
    attempts = [a.model_dump(mode="json") for a in await meta.list_attempts(task_id)]
    if attempts and res is not None and res.error and not attempts[-1]["error"]:
        # the agent's own failure ends the attempt as a success; its message is the result's
        attempts[-1].update(error=res.error, error_kind=_error_kind(rec, res), error_from="result")
    kept = await attempt_trajectories(artifacts, rec.spec, [a["number"] for a in attempts])
    for a in attempts:  # each attempt's own trajectory, a retried one's too
        a["has_trajectory"] = a["number"] in kept
    return {
        "id": rec.id,
        "run": rec.spec.run_id,
        "state": rec.state.value,
        "type": _task_type(rec),
        "outcome": outcome(rec.state, res),
        "errored": is_error(outcome(rec.state, res)),
        "error": (res.error if res is not None else None) or rec.error,
        "error_kind": _error_kind(rec, res),
        "attempts": attempts,
        "result": res.model_dump(mode="json") if res is not None else None,
        "grade": json.loads(grade_text) if grade_text else None,
        "patch": await _text(artifacts, res.artifacts.get("patch") if res else None),
        # the result's, or (a task that ended without one) its last attempt's
        "has_trajectory": bool(kept) or (res is not None and "trajectory" in res.artifacts),
    }


async def queued_by_type(meta: MetadataStore) -> dict[str, Any]:
    """Tasks waiting to be placed (state QUEUED or RETRYING), by task type and by run."""
    waiting = await meta.list_tasks(None, states=[TaskState.QUEUED, TaskState.RETRYING])
    by_type = Counter(_task_type(rec) for rec in waiting)
    by_run = Counter(rec.spec.run_id for rec in waiting)
    return {"by_type": dict(by_type), "by_run": dict(by_run), "total": len(waiting)}

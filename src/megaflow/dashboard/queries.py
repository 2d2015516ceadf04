"""What the run page's task list, the task page show.

Each function takes the stores and returns plain JSON-ready dicts; nothing is
cached, so a page always shows what the stores hold now. A run's figures
(its header and the runs page) are :mod:`megaflow.dashboard.summary`. A
task's time is the sum of its result's stage times (sandbox start,
preparation, agent, grading: :data:`DURATION_PARTS`). A run's task list is
paged, sorted and searched here (:func:`run_tasks`), so a run of thousands
of tasks sends one page; each row carries its id relative to the run. The
trajectory page's data is :mod:`megaflow.dashboard.trajectories`.
"""

from __future__ import annotations

import json
from typing import Any

from megaflow.core.errors import InvalidInput, NotFound
from megaflow.core.outcomes import is_error, outcome
from megaflow.core.states import TaskState
from megaflow.core.tasks import TaskResult
from megaflow.dashboard.attempts import attempt_trajectories
from megaflow.dashboard.summary import by_task, error_kind_of, type_of
from megaflow.storage.abstract import ArtifactStore, MetadataStore

HISTOGRAM_BINS = 10
DURATION_PARTS = ("sandbox_start_s", "prepare_s", "agent_s", "grade_s")
"""The stages of an attempt whose times add up to the task's time."""


def _duration(res: TaskResult | None) -> float | None:
    if res is None:
        return None
    parts = [res.metrics[k] for k in DURATION_PARTS if k in res.metrics]
    return sum(parts) if parts else None


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
    results = by_task(await meta.list_results(run_id))
    needle = (search or "").strip().lower()
    rows: list[dict[str, Any]] = []
    for rec in await meta.list_tasks(run_id):
        res = results.get(rec.id)
        row: dict[str, Any] = {
            "id": rec.id,
            "short_id": _short(run_id, rec.id),
            "state": rec.state.value,
            "type": type_of(rec),
            "attempts": rec.attempts,
            "outcome": outcome(rec.state, res),
            "success": res.success if res is not None else None,
            "reward": res.reward if res is not None and rec.state is TaskState.SUCCEEDED else None,
            "duration_s": _duration(res),
            "error_kind": error_kind_of(rec, res),
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
        attempts[-1].update(
            error=res.error, error_kind=error_kind_of(rec, res), error_from="result"
        )
    kept = await attempt_trajectories(artifacts, rec.spec, [a["number"] for a in attempts])
    for a in attempts:  # each attempt's own trajectory, a retried one's too
        a["has_trajectory"] = a["number"] in kept
    return {
        "id": rec.id,
        "run": rec.spec.run_id,
        "state": rec.state.value,
        "type": type_of(rec),
        "outcome": outcome(rec.state, res),
        "errored": is_error(outcome(rec.state, res)),
        "error": (res.error if res is not None else None) or rec.error,
        "error_kind": error_kind_of(rec, res),
        "attempts": attempts,
        "result": res.model_dump(mode="json") if res is not None else None,
        "grade": json.loads(grade_text) if grade_text else None,
        "patch": await _text(artifacts, res.artifacts.get("patch") if res else None),
        # the result's, or (a task that ended without one) its last attempt's
        "has_trajectory": bool(kept) or (res is not None and "trajectory" in res.artifacts),
    }

"""Two runs (or a run's two arms) side by side, one row per instance.

The run page's comparison (``/run?id=A&vs=B``): each instance both runs
sampled, with each run's samples, graded samples, resolved samples and mean
reward over its graded ones (an ungraded sample has no reward, as
everywhere on the dashboard), and the difference of the means. An
instance is a task's ``payload["instance_id"]`` when the task has one (a
train run's rollouts and held-out rounds name the same instance in ids
that differ by round), else its id relative to the run less the sample
number. Instances only one run sampled are listed too, the other side empty.
"""

from __future__ import annotations

import statistics
from typing import Any

from megaflow.core.states import TaskState
from megaflow.core.tasks import TaskRecord, TaskResult, group_id
from megaflow.storage.abstract import MetadataStore


def instance_of(rec: TaskRecord) -> str:
    named = rec.spec.payload.get("instance_id")
    if isinstance(named, str) and named:
        return named
    gid = group_id(rec.spec)
    prefix = rec.spec.run_id + "/"
    return gid[len(prefix) :] if gid.startswith(prefix) else gid


def _per_instance(
    records: list[TaskRecord], results: dict[str, TaskResult]
) -> dict[tuple[str, str], dict[str, Any]]:
    by: dict[tuple[str, str], list[TaskRecord]] = {}
    for rec in records:
        kind = rec.spec.type.value if rec.spec.type is not None else "eval"
        by.setdefault((instance_of(rec), kind), []).append(rec)
    out = {}
    for key, recs in by.items():
        graded = [results[r.id] for r in recs if r.state is TaskState.SUCCEEDED and r.id in results]
        out[key] = {
            "samples": len(recs),
            "graded": len(graded),
            "resolved": sum(1 for g in graded if g.success),
            "reward_mean": statistics.fmean(g.reward for g in graded) if graded else None,
        }
    return out


async def compare_runs(meta: MetadataStore, a: str, b: str) -> dict[str, Any]:
    """Runs ``a`` and ``b`` per instance and task type. Raises NotFound for either."""
    sides = []
    for run_id in (a, b):
        await meta.get_run(run_id)
        results = {r.task_id: r for r in await meta.list_results(run_id)}
        sides.append(_per_instance(await meta.list_tasks(run_id), results))
    rows = []
    for instance, kind in sorted(set(sides[0]) | set(sides[1])):
        left, right = sides[0].get((instance, kind)), sides[1].get((instance, kind))
        ma, mb = (s["reward_mean"] if s else None for s in (left, right))
        delta = mb - ma if ma is not None and mb is not None else None
        rows.append({"instance": instance, "type": kind, "a": left, "b": right, "delta": delta})
    return {"a": a, "b": b, "rows": rows}

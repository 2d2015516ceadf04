"""Each attempt's trajectory of a task, for the task and trajectory pages.

Every attempt of a task keeps its artifacts under its own prefix
(:func:`megaflow.core.tasks.artifact_prefix`): an attempt that failed on
the infrastructure and was retried leaves its trajectory as evidence, and
the result links the last attempt's only. :func:`attempt_trajectories`
finds which attempts left one, with one listing of the task's prefix, so
the task page links each attempt's trajectory and the trajectory page can
open any of them (``?attempt=N``) and say which it shows.
:func:`tasks_with_trajectories` finds, with one listing of the run's prefix,
which of a run's tasks left one, a task that ended without a result (timed
out, failed on the infrastructure) included, so previous/next reaches it.
"""

from __future__ import annotations

from typing import Any

from megaflow.core.tasks import Attempt, TaskRecord, TaskResult, TaskSpec, artifact_prefix
from megaflow.storage.abstract import ArtifactStore

TRAJECTORY = "trajectory.json"


async def attempt_trajectories(
    artifacts: ArtifactStore, spec: TaskSpec, numbers: list[int]
) -> dict[int, str]:
    """Attempt number -> the key of its stored trajectory, for the attempts that left one."""
    if not numbers:
        return {}
    stored = set(await artifacts.list(_task_prefix(spec)))
    keys = {n: f"{artifact_prefix(spec, n)}/{TRAJECTORY}" for n in numbers}
    return {n: k for n, k in keys.items() if k in stored}


def _task_prefix(spec: TaskSpec) -> str:
    return artifact_prefix(spec, 1).rsplit("/", 1)[0] + "/"


async def tasks_with_trajectories(
    artifacts: ArtifactStore, run_id: str, records: list[TaskRecord], results: dict[str, TaskResult]
) -> list[str]:
    """The ids of ``records`` (one run's, in its order) with a stored trajectory: the
    result's, or any attempt's (one listing of the run's tasks prefix)."""
    stored = await artifacts.list(f"runs/{run_id}/tasks/")
    dirs = {k.rsplit("/", 2)[0] + "/" for k in stored if k.endswith(f"/{TRAJECTORY}")}
    return [
        r.id
        for r in records
        if (r.id in results and "trajectory" in results[r.id].artifacts)
        or _task_prefix(r.spec) in dirs
    ]


def attempt_rows(
    attempts: list[Attempt], keys: dict[int, str], res: TaskResult | None, shown: str | None
) -> list[dict[str, Any]]:
    """One row per attempt: its number, error, whether its trajectory is stored, whether
    it is the result's (the last) and whether it is the one ``shown``."""
    final = res.artifacts.get("trajectory") if res is not None else None
    return [
        {"number": a.number, "error_kind": a.error_kind.value if a.error_kind else None,
         "error": a.error, "has_trajectory": a.number in keys,
         "final": keys.get(a.number) == final, "this": keys.get(a.number) == shown}
        for a in attempts
    ]  # fmt: skip

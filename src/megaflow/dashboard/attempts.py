"""Each attempt's trajectory of a task, for the task and trajectory pages.

Every attempt of a task keeps its artifacts under its own prefix
(:func:`megaflow.core.tasks.artifact_prefix`): an attempt that failed on
the infrastructure and was retried leaves its trajectory as evidence, and
the result links the last attempt's only. :func:`attempt_trajectories`
finds which attempts left one, with one listing of the task's prefix, so
the task page links each attempt's trajectory and the trajectory page can
open any of them (``?attempt=N``) and say which it shows.
"""

from __future__ import annotations

from typing import Any

from megaflow.core.tasks import Attempt, TaskResult, TaskSpec, artifact_prefix
from megaflow.storage.abstract import ArtifactStore

TRAJECTORY = "trajectory.json"


async def attempt_trajectories(
    artifacts: ArtifactStore, spec: TaskSpec, numbers: list[int]
) -> dict[int, str]:
    """Attempt number -> the key of its stored trajectory, for the attempts that left one."""
    if not numbers:
        return {}
    task_prefix = artifact_prefix(spec, 1).rsplit("/", 1)[0] + "/"
    stored = set(await artifacts.list(task_prefix))
    keys = {n: f"{artifact_prefix(spec, n)}/{TRAJECTORY}" for n in numbers}
    return {n: k for n, k in keys.items() if k in stored}


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

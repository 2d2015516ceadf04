"""Turning instances into the scheduler's ``TaskSpec``s, and back.

The payload of each task is the instance itself as plain JSON, with the keys
agreed with the agent service: ``instance_id``, ``problem_statement``,
``patch`` (gold), ``test_patch``, ``FAIL_TO_PASS``, ``PASS_TO_PASS``,
``repo``, ``base_commit`` and ``megaflow_source`` (with an absolute path).
Sample ids are :func:`megaflow.core.tasks.sample_id`'s ``<run>/<instance>/<n>``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from megaflow.core.tasks import TaskSpec, TaskType, sample_id
from megaflow.datasets.instance import SWEInstance


def to_task_specs(
    instances: Iterable[SWEInstance],
    run_id: str,
    samples: int = 1,
    task_type: TaskType | None = None,
    **fields: Any,
) -> list[TaskSpec]:
    """One task per instance and sample. ``fields`` sets other ``TaskSpec`` fields
    (``environment``, ``agent``, ``model``, ``timeouts``, ``priority``...)."""
    if samples < 1:
        raise ValueError(f"samples must be at least 1, got {samples}")
    return [
        TaskSpec(
            id=sample_id(run_id, inst.instance_id, n),
            run_id=run_id,
            type=task_type,
            sample=n,
            payload=inst.to_payload(),
            **fields,
        )
        for inst in instances
        for n in range(samples)
    ]


def instance_of(task: TaskSpec) -> SWEInstance:
    """The instance a task carries in its payload."""
    return SWEInstance.from_payload(task.payload)

"""The bundled SWE task set, prepared in a sandbox the way a run prepares it."""

from __future__ import annotations

from pathlib import Path

from megaflow.core.tasks import TaskSpec
from megaflow.datasets.instance import SWEInstance
from megaflow.datasets.prepare import environment_spec, prepare_sandbox
from megaflow.datasets.tasks import to_task_specs
from megaflow.environment.abstract import Runtime, Sandbox

TASKS = Path(__file__).resolve().parents[2] / "tasks" / "mini-swe"


async def prepared(runtime: Runtime, instance: SWEInstance) -> tuple[TaskSpec, Sandbox]:
    """A task for ``instance`` and a sandbox holding its repository at the base commit."""
    (task,) = to_task_specs([instance], run_id="agent-test")
    sandbox = await runtime.create(environment_spec(instance), owner=task.id)
    await prepare_sandbox(sandbox, instance)
    return task, sandbox

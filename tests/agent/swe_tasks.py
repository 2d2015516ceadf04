"""The bundled SWE task set, prepared in a sandbox the way a run prepares it."""

from __future__ import annotations

from pathlib import Path

from megaflow.core.tasks import TaskSpec
from megaflow.datasets.candidate import extract_patch
from megaflow.datasets.grading import GradeReport
from megaflow.datasets.instance import SWEInstance
from megaflow.datasets.prepare import environment_spec, prepare_sandbox
from megaflow.datasets.task_specs import to_task_specs
from megaflow.datasets.validate import grade_patch
from megaflow.environment.abstract import Runtime, Sandbox

TASKS = Path(__file__).resolve().parents[2] / "tasks" / "mini-swe"


async def prepared(runtime: Runtime, instance: SWEInstance) -> tuple[TaskSpec, Sandbox]:
    """A task for ``instance`` and a sandbox holding its repository at the base commit."""
    (task,) = to_task_specs([instance], run_id="agent-test")
    sandbox = await runtime.create(environment_spec(instance), owner=task.id)
    await prepare_sandbox(sandbox, instance)
    return task, sandbox


async def grade_agent(runtime: Runtime, sandbox: Sandbox, instance: SWEInstance) -> GradeReport:
    """Grade what the agent left in ``sandbox`` as a run does: its patch, in a fresh sandbox."""
    candidate = await extract_patch(sandbox, instance.base_commit)
    assert candidate.error is None, candidate.error
    return await grade_patch(runtime, instance, candidate.patch)

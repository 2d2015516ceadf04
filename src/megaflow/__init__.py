"""MegaFlow: distributed orchestration of LLM agents, sandboxes and model inference."""

from megaflow._version import __version__
from megaflow.core import (
    RunSpec,
    TaskRecord,
    TaskResult,
    TaskSpec,
    TaskState,
    TaskType,
    Trajectory,
)
from megaflow.core.errors import MegaFlowError

__all__ = [
    "MegaFlowError",
    "RunSpec",
    "TaskRecord",
    "TaskResult",
    "TaskSpec",
    "TaskState",
    "TaskType",
    "Trajectory",
    "__version__",
]

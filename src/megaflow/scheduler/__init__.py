"""The control plane: an event-driven scheduler with pluggable policies.

The app layer needs :class:`Scheduler` (see :mod:`megaflow.scheduler.service`)
and implements :class:`TaskExecutor`; everything else is for plug-ins and tests.
"""

from megaflow.scheduler.abstract import (
    FleetProvider,
    InstanceSpec,
    PendingTask,
    SchedulingPolicy,
    TaskContext,
    TaskExecutor,
)
from megaflow.scheduler.config import SchedulerConfig
from megaflow.scheduler.service import Scheduler

__all__ = [
    "FleetProvider",
    "InstanceSpec",
    "PendingTask",
    "Scheduler",
    "SchedulerConfig",
    "SchedulingPolicy",
    "TaskContext",
    "TaskExecutor",
]

"""An example custom policy: training tasks get 1.5x priority.

Use it from a run config::

    scheduler:
      policy:
        type: custom
        path: examples.policies.boost_training.BoostTrainingPolicy
        options: {boost: 1.5, aging_per_s: 0.1}
"""

from __future__ import annotations

from typing import Any

from megaflow.core.tasks import TaskSpec, TaskType
from megaflow.scheduler.policies import PriorityPolicy


class BoostTrainingPolicy(PriorityPolicy):
    """Priority order with aging, where ``train`` tasks count ``boost`` times."""

    def __init__(self, boost: float = 1.5, aging_per_s: float = 0.1, **options: Any) -> None:
        super().__init__(aging_per_s=aging_per_s, **options)
        self.boost = float(boost)

    def base_priority(self, spec: TaskSpec) -> float:
        if spec.type is TaskType.TRAIN:
            return spec.priority * self.boost
        return float(spec.priority)

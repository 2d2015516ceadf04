"""What the ``learned`` policy sees: run-time estimates from feedback, and the
rows of :data:`~megaflow.scheduler.learned_net.FEATURES` built from its candidates.

Every feature is relative to the other candidates of the same decision, so that
the policy does not depend on a fleet's size or a trace's time scale.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from megaflow.core.tasks import Outcome, TaskSpec
from megaflow.scheduler.abstract import TaskFeedback
from megaflow.scheduler.learned_net import N_FEATURES

if TYPE_CHECKING:
    from megaflow.scheduler.fleet import Region
    from megaflow.scheduler.learned_net import Array

Candidate = tuple[int, float, float, "float | None", int, int, int, bool]
"""One candidate as the policy sees it: priority, CPU, age, predicted run time (None
before any feedback), free mCPU and capacity of its instance, tasks in its class,
and whether it was offered as a spread placement."""


class RunTimeEstimates:
    """Mean run time of finished placements by (type, run) and by type, from feedback."""

    def __init__(self, horizon: int = 50) -> None:
        self.horizon = horizon
        self._mean: dict[tuple[str, str], tuple[int, float]] = {}

    def _update(self, key: tuple[str, str], x: float) -> None:
        n, m = self._mean.get(key, (0, 0.0))
        n += 1
        self._mean[key] = (n, m + (x - m) / min(n, self.horizon))

    def observe(self, fb: TaskFeedback) -> None:
        if fb.outcome is not Outcome.OK:
            return
        spec = fb.task.spec
        kind = spec.type.value if spec.type is not None else "untyped"
        self._update((kind, spec.run_id), fb.run_s)
        self._update((kind, ""), fb.run_s)
        self._update(("", ""), fb.run_s)

    def predict(self, spec: TaskSpec) -> float | None:
        kind = spec.type.value if spec.type is not None else "untyped"
        return self.predict_for(kind, spec.run_id)

    def predict_for(self, kind: str, run: str) -> float | None:
        """The mean of (kind, run), else of kind, else of everything; None before any."""
        mean = self._mean
        got = mean.get((kind, run)) or mean.get((kind, "")) or mean.get(("", ""))
        return None if got is None else got[1]


def candidate_features(rows: list[Candidate], region: Region, queued: int) -> tuple[Array, Array]:
    """One row of :data:`FEATURES` per candidate, and the critic's state vector.
    ``queued`` is the number of waiting tasks (at least 1)."""
    import numpy as np

    known = [r[3] for r in rows if r[3] is not None]
    fallback = sum(known) / len(known) if known else 1.0
    raw = np.array(
        [(*r[:3], fallback if r[3] is None else r[3], *r[4:], r[3] is not None) for r in rows],
        dtype=np.float32,
    )
    prio, cpu, age, pred, free, cap = (raw[:, i] for i in range(6))
    lo, hi = raw[:, :4].min(0), raw[:, :4].max(0)
    work = np.maximum(pred * cpu, 1e-6)
    w_lo, w_hi = float(work.min()), float(work.max())
    x = np.empty((len(rows), N_FEATURES), dtype=np.float32)
    x[:, 0] = (prio - lo[0]) / (hi[0] - lo[0]) if hi[0] > lo[0] else 0.5
    x[:, 1] = age / max(float(hi[2]), 1e-9)
    x[:, 2] = pred / max(float(hi[3]), 1e-9)
    x[:, 3] = work / w_hi
    x[:, 4] = np.log(work / w_lo) / math.log(w_hi / w_lo) if w_hi > w_lo * 1.001 else 0.0
    x[:, 5] = age / (age + np.maximum(pred, 1e-9))
    x[:, 6] = np.minimum(1.0, cpu * 1000 / np.maximum(free, 1.0))
    x[:, 7] = 1.0 - free / np.maximum(cap, 1.0)
    x[:, 8] = region.running / max(1, region.total_slots)
    x[:, 9] = np.minimum(1.0, raw[:, 6] / queued)
    x[:, 10:12] = raw[:, 7:9]
    pressure = math.log1p(queued / max(1, region.total_slots))
    state = np.concatenate([x.mean(0), x.max(0), [x[0, 8], pressure]]).astype(np.float32)
    return x, state

"""``in_process``: the rollout backends live in the trainer's process; the state
dict is handed over as tensors and copied into each live model (no disk, no copy
over a wire). The quickstart's default."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from megaflow.core.errors import ConfigError, ModelError
from megaflow.train.weight_sync.abstract import Engines, SyncResult, WeightSync, check_served


class InProcessWeightSync(WeightSync):
    def __init__(self, engines: Engines) -> None:
        self.engines = engines

    async def push(self, weights: Mapping[str, Any], version: int) -> SyncResult:
        t0 = time.perf_counter()
        served: dict[str, int] = {}
        for name, control in self.engines.items():
            try:
                statuses = await control.update_weights(dict(weights), version)
            except ModelError as exc:
                # In process a refusal means the backend cannot take weights at all.
                raise ConfigError(str(exc), [("model.type", str(exc))]) from exc
            problem = check_served(name, statuses, version, served)
            if problem:
                raise ModelError(f"weights v{version} did not take: {problem}")
        return SyncResult(version=version, seconds=time.perf_counter() - t0, served=served)

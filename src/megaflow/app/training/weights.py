"""Weight sync: the trainer's new weights into the rollout backends, in place.

The rollout model is the job's in-process model client; its model control
(``ModelControl.update_weights``) hands the new state dict to every replica
of its router (no restart: calls in flight finish on the weights they started with, the next
ones use the new version, and every recorded call says which version made
it). A backend that cannot take weights (replay, scripted, a remote OpenAI
server) raises ModelError, which `megaflow train` reports as a config error.
"""

from __future__ import annotations

import time

from megaflow.core.errors import ConfigError, ModelError
from megaflow.model.abstract import ModelClient, Weights
from megaflow.model.client import InProcessModelClient


async def push_weights(client: ModelClient, weights: Weights, version: int) -> float:
    """Send ``weights`` as ``version`` to every replica; the seconds it took."""
    if not isinstance(client, InProcessModelClient):
        raise ConfigError(
            "megaflow train updates the rollout model in place: model.type must be an "
            "in-process backend (transformers)",
            [("model.type", "needs a backend that takes new weights")],
        )
    t0 = time.perf_counter()
    try:
        await client.control.update_weights(weights, version)
    except ModelError as exc:
        raise ConfigError(str(exc), [("model.type", str(exc))]) from exc
    return time.perf_counter() - t0

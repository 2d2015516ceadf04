"""The engines a run's weight sync updates, from its rollout model client.

The rollout model is the job's in-process model client; its model control
(``ModelControl.update_weights``) takes new weights for every replica of its
router (no restart: calls in flight finish on the weights they started with,
the next ones use the new version, and every recorded call says which version
made it). How the weights travel (tensors, or a checkpoint path) is the
``train.weight_sync`` config's business (:mod:`megaflow.train.weight_sync`).
A backend that cannot take weights (replay, scripted, a remote OpenAI server)
refuses, which `megaflow train` reports as a config error.
"""

from __future__ import annotations

from megaflow.core.errors import ConfigError
from megaflow.model.abstract import ModelClient
from megaflow.model.client import InProcessModelClient
from megaflow.train.weight_sync.abstract import Engines


def engines_of(client: ModelClient) -> Engines:
    """The model control of the run's rollout model, as the one engine to update."""
    if not isinstance(client, InProcessModelClient):
        raise ConfigError(
            "megaflow train updates the rollout model in place: model.type must be an "
            "in-process backend (transformers)",
            [("model.type", "needs a backend that takes new weights")],
        )
    return {"in-process": client.control}

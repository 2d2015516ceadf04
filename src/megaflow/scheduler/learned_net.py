"""The learned policy's network and checkpoint: numpy inference, safetensors files.

A checkpoint is one safetensors file: the actor's layers (``actor.0.weight``,
``actor.0.bias``, ...), the critic's (``critic.*``, used only to go on
training) and metadata (format version, the feature names the network was
trained on, what it was trained on). The actor scores each candidate action
(one row of :data:`FEATURES`) with the same small MLP, so the number of
candidates may change from one decision to the next. Inference is numpy only:
the scheduler never imports torch (``megaflow sim train`` does, to train).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from megaflow.core.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Array = npt.NDArray[np.float32]

FORMAT = "megaflow-learned-policy/1"
FEATURES = (
    "priority",  # relative to the candidates: 0 lowest, 1 highest
    "age",  # time waited over the longest wait among the candidates
    "predicted_time",  # predicted run time over the longest among the candidates
    "predicted_work",  # predicted CPU-seconds over the largest among the candidates
    "work_log_rank",  # log(work / least work) over log(most / least): 0 least, 1 most
    "waited_vs_predicted",  # age / (age + its own predicted run time)
    "resource_efficiency",  # the task's CPU over the instance's free CPU
    "node_load",  # share of the instance's CPU in use before placing
    "region_load",  # share of the region's slots in use
    "backlog_share",  # tasks of this class over all queued
    "spread",  # 1 when placed on the emptiest instance, 0 for best fit
    "known_time",  # 1 when the prediction comes from finished tasks of its kind
)
N_FEATURES = len(FEATURES)
CRITIC_INPUTS = 2 * N_FEATURES + 2
"""Mean and max of the candidates' rows, region load, log queued per slot."""


@dataclass
class Checkpoint:
    """The weights (layer by layer, ``(weight[in, out], bias[out])``) and metadata."""

    actor: list[tuple[Array, Array]]
    critic: list[tuple[Array, Array]]
    meta: dict[str, Any] = field(default_factory=dict)

    def logits(self, x: Array) -> Array:
        """Actor scores of candidate rows ``x`` (candidates x features)."""
        return _mlp(self.actor, x)[:, 0]

    def value(self, state: Array) -> float:
        return float(_mlp(self.critic, state[None, :])[0, 0])


def _mlp(layers: list[tuple[Array, Array]], x: Array) -> Array:
    import numpy as np

    last = len(layers) - 1
    for i, (w, b) in enumerate(layers):
        x = x @ w + b
        if i < last:
            x = np.tanh(x)
    return x


def save_checkpoint(ckpt: Checkpoint, path: str | Path) -> None:
    from safetensors.numpy import save_file

    tensors = {}
    for name, layers in (("actor", ckpt.actor), ("critic", ckpt.critic)):
        for i, (w, b) in enumerate(layers):
            tensors[f"{name}.{i}.weight"] = w
            tensors[f"{name}.{i}.bias"] = b
    meta = {"format": FORMAT, "features": json.dumps(FEATURES), "meta": json.dumps(ckpt.meta)}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path), metadata=meta)


def _layers(tensors: dict[str, Array], name: str, width_in: int) -> list[tuple[Array, Array]]:
    layers = []
    i = 0
    while f"{name}.{i}.weight" in tensors:
        w, b = tensors[f"{name}.{i}.weight"], tensors.get(f"{name}.{i}.bias")
        if b is None or w.ndim != 2 or b.shape != (w.shape[1],) or w.shape[0] != width_in:
            raise ValueError(f"layer {name}.{i} has the wrong shape")
        layers.append((w, b))
        width_in = w.shape[1]
        i += 1
    if not layers or width_in != 1:
        raise ValueError(f"no {name} network ending in one output")
    return layers


def read_checkpoint(path: str | Path) -> Checkpoint:
    """Load a checkpoint; a missing, unreadable or mismatched file is a ``ConfigError``
    naming it (the scheduler refuses to start rather than fall back to another policy)."""
    p = Path(path)
    where = [("scheduler.policy.checkpoint", str(p))]
    if not p.is_file():
        raise ConfigError(
            f"learned policy checkpoint {p} does not exist; train one with "
            "`megaflow sim train --out PATH`",
            where,
        )
    try:
        import numpy as np
        from safetensors import safe_open
    except ImportError as exc:
        raise ConfigError(
            f"the learned policy needs numpy and safetensors (pip install 'megaflow[train]'): "
            f"{exc}",
            where,
        ) from None
    try:
        with safe_open(str(p), framework="numpy") as f:
            header = f.metadata() or {}
            tensors = {k: np.asarray(f.get_tensor(k), dtype=np.float32) for k in f.keys()}  # noqa: SIM118
        if header.get("format") != FORMAT:
            raise ValueError(f"format is {header.get('format')!r}, expected {FORMAT!r}")
        if tuple(json.loads(header.get("features", "[]"))) != FEATURES:
            raise ValueError("it was trained on other features than this version computes")
        actor = _layers(tensors, "actor", N_FEATURES)
        critic = _layers(tensors, "critic", CRITIC_INPUTS)
        meta = json.loads(header.get("meta", "{}"))
    except Exception as exc:  # safetensors raises its own error types for a corrupt file
        raise ConfigError(f"learned policy checkpoint {p} is not usable: {exc}", where) from None
    return Checkpoint(actor, critic, meta if isinstance(meta, dict) else {})

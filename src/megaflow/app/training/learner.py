"""The trainer of a training run, built from its config.

The loop's ``train:`` section is the trainer's :class:`TrainerConfig` with
the loop's own fields beside it; the trainer gets its fields only (its ranks
re-read them strictly), with the checkpoint prefix made the run's own
(``<checkpoint_prefix>/<run id>``), so a run resumes from its checkpoints
and no other's. The policy starts from ``train.policy``, else the rollout
model's own directory: the trainer and the engines hold the same weights,
version 0.
torch is imported when the trainer starts, not with this module.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from megaflow.config.models import RunConfig
from megaflow.core.errors import ConfigError
from megaflow.model.config import TransformersModelConfig
from megaflow.train.config import TrainerConfig
from megaflow.train.loop_config import TrainingConfig

if TYPE_CHECKING:
    from megaflow.train.trainer import Trainer


def trainer_config(tc: TrainingConfig, run_id: str) -> TrainerConfig:
    fields = tc.model_dump(include=set(TrainerConfig.model_fields))
    fields["checkpoint_prefix"] = f"{tc.checkpoint_prefix.rstrip('/')}/{run_id}"
    return TrainerConfig.model_validate(fields)


def policy_dir(cfg: RunConfig) -> Path:
    """The directory the trainer starts from: ``train.policy``, else the rollout
    model's own; checked to take weights the way ``train.weight_sync`` sends them."""
    model, tc = cfg.model, cfg.train
    forms = model.weight_forms()
    if not forms:
        raise ConfigError(
            f"megaflow train pushes new weights to the rollout model, and model.type "
            f"{model.type!r} cannot take them; use 'transformers' (a local model directory) "
            f"or 'openai' with a weight_sync",
            [("model.type", "cannot take new weights")],
        )
    if tc is not None and tc.weight_sync.carries not in forms:
        raise ConfigError(
            f"train.weight_sync.type {tc.weight_sync.type!r} sends {tc.weight_sync.carries}, "
            f"which model.type {model.type!r} cannot take; use 'disk'",
            [("train.weight_sync.type", f"{model.type} takes {', '.join(sorted(forms))}")],
        )
    if tc is not None and tc.policy is not None:
        path, field = Path(tc.policy), "train.policy"
    elif isinstance(model, TransformersModelConfig):
        path, field = Path(model.model), "model.model"
    else:
        raise ConfigError(
            "train.policy is not set: with the rollout model elsewhere, name the model "
            "directory the trainer starts from (the weights the engines serve as version 0)",
            [("train.policy", "required unless model.type is transformers")],
        )
    if not path.is_dir():
        raise ConfigError(
            f"{field}: {path} is not a model directory; build it first (the quickstart's "
            f"policy, .megaflow/models/settings-kinds, is built by `make run`)",
            [(field, "no such directory")],
        )
    return path


def open_trainer(cfg: RunConfig, run_id: str) -> Trainer:
    """The trainer (every rank started) on the rollout model's initial weights."""
    from megaflow.train.launch import start

    if cfg.train is None:
        raise ConfigError("the config has no train: section", [("train", "missing")])
    trainer = start(policy_dir(cfg), trainer_config(cfg.train, run_id))
    if trainer is None:  # a torchrun rank > 0 served its ranks and is done
        raise SystemExit(0)
    return trainer

"""The trainer of a training run, built from its config.

The loop's ``train:`` section is the trainer's :class:`TrainerConfig` with
the loop's own fields beside it; the trainer gets its fields only (its ranks
re-read them strictly), with the checkpoint prefix made the run's own
(``<checkpoint_prefix>/<run id>``), so a run resumes from its checkpoints
and no other's. The policy starts from the rollout model's own directory:
the trainer and the ``transformers`` backend load the same weights, version 0.
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
    """The rollout model's directory, which the trainer starts from."""
    model = cfg.model
    if not isinstance(model, TransformersModelConfig):
        raise ConfigError(
            f"megaflow train updates the rollout model in place; model.type is "
            f"{model.type!r}, use 'transformers' (a local model directory)",
            [("model.type", "must be transformers for a training run")],
        )
    path = Path(model.model)
    if not path.is_dir():
        raise ConfigError(
            f"model.model: {path} is not a model directory",
            [("model.model", "no such directory")],
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

"""The optimizer of a trainer rank: AdamW, or 1-bit Adam attached to DDP.

``optimizer: adamw`` is ``torch.optim.AdamW`` over the (possibly sharded)
parameters. ``optimizer: onebit_adam`` is :class:`~megaflow.train.onebit_adam.OnebitAdam`
with the same moments and decay, ``onebit_warmup_steps`` of full-precision
Adam and ``onebit_block`` elements per scale; under DDP it is attached to
the wrapper, so DDP's all-reduce runs during the warm-up only. Under FSDP
it refuses the sharded parameters (the config already refuses the pair).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel

from megaflow.train.config import TrainerConfig
from megaflow.train.onebit_adam import OnebitAdam


def build_optimizer(model: Any, config: TrainerConfig) -> torch.optim.Optimizer:
    common: dict[str, Any] = {
        "lr": config.lr,
        "betas": config.betas,
        "eps": config.adam_eps,
        "weight_decay": config.weight_decay,
    }
    if config.optimizer == "adamw":
        return torch.optim.AdamW(model.parameters(), **common)
    opt = OnebitAdam(
        model.parameters(),
        **common,
        warmup_steps=config.onebit_warmup_steps,
        block=config.onebit_block,
    )
    if isinstance(model, DistributedDataParallel):
        opt.attach(model)
    return opt

"""The operating schedules of a trainer step: learning rate by batch, batch-size warm-up.

Both are pure arithmetic on the step's size, the same on every rank (each
rank receives the whole step):

* :func:`scaled_lr`: ``lr`` at the global batch ``lr_base_batch``, scaled
  linearly (Goyal et al., 2017) or by the square root (the rule usually
  given for Adam) with the samples the step trains; ``none`` keeps ``lr``.
* :func:`warmup_groups`: during the first ``batch_warmup_steps`` steps the
  trainer trains on a growing share of the groups it is given, ``ceil(n *
  k / K)`` at step ``k`` of ``K``, so the first updates come from small
  batches (and, with scaling on, at a smaller learning rate).

This module imports neither torch nor transformers.
"""

from __future__ import annotations

import math

from megaflow.train.config import TrainerConfig


def scaled_lr(config: TrainerConfig, global_batch: int) -> float:
    """The learning rate of a step that trains ``global_batch`` samples."""
    if config.lr_scaling == "none" or global_batch <= 0:
        return config.lr
    ratio = global_batch / config.lr_base_batch
    return config.lr * (ratio if config.lr_scaling == "linear" else math.sqrt(ratio))


def warmup_groups(config: TrainerConfig, step: int, groups: int) -> int:
    """How many of ``groups`` optimizer step ``step`` (1-based) trains on."""
    k = config.batch_warmup_steps
    if not k or step > k:
        return groups
    return min(groups, max(1, math.ceil(groups * step / k)))

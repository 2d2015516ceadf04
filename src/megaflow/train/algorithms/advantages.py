"""The built-in advantage estimators: GRPO's group mean, RLOO, REINFORCE++.

Each takes one float64 tensor per group, the rewards of the group's live
(unmasked) samples, and returns the advantages in the same shapes. A group
whose rewards are all equal, or that has fewer than two, carries no signal
for a group baseline: its advantages are 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch

from megaflow.train.algorithms.registry import register_advantage


def _flat(r: torch.Tensor) -> bool:
    return len(r) < 2 or bool((r == r[0]).all())


@register_advantage("grpo")
def grpo(
    rewards: Sequence[torch.Tensor], *, scale_std: bool = True, std_eps: float = 1e-6
) -> list[torch.Tensor]:
    """``r - mean(group)``, divided by the group's population std + ``std_eps``
    when ``scale_std`` (GRPO); without it, Dr. GRPO's advantage."""
    out = []
    for r in rewards:
        if _flat(r):
            out.append(torch.zeros_like(r))
            continue
        adv = r - r.mean()
        if scale_std:
            adv = adv / (r.std(correction=0) + std_eps)
        out.append(adv)
    return out


@register_advantage("rloo")
def rloo(rewards: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """``r_i - mean(r_j, j != i)``: the leave-one-out baseline of RLOO."""
    out = []
    for r in rewards:
        if _flat(r):
            out.append(torch.zeros_like(r))
            continue
        out.append(r - (r.sum() - r) / (len(r) - 1))
    return out


@register_advantage("reinforce_pp")
def reinforce_pp(
    rewards: Sequence[torch.Tensor],
    *,
    baseline: Literal["batch", "group"] = "batch",
    std_eps: float = 1e-6,
) -> list[torch.Tensor]:
    """REINFORCE++: subtract the baseline (each group's mean for 'group'), then
    normalise over every sample of the batch: ``(a - mean) / (std + std_eps)``
    with the batch's population std. All-equal values give 0."""
    if baseline == "group":
        centred = [torch.zeros_like(r) if _flat(r) else r - r.mean() for r in rewards]
    else:
        centred = list(rewards)
    flat = torch.cat(centred) if centred else torch.zeros(0, dtype=torch.float64)
    if _flat(flat):
        return [torch.zeros_like(r) for r in rewards]
    mean, std = flat.mean(), flat.std(correction=0)
    return [(a - mean) / (std + std_eps) for a in centred]

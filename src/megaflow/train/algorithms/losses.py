"""The built-in policy losses: PPO's clipped ratio per token, and GSPO's per sequence.

Both bound the ratio the same way (:class:`~.algorithm.Clip`): the log ratio
is clamped to ``[-log_ratio_max, log_ratio_max]`` before ``exp``; the
clipped objective takes ``max(-A * r, -A * clip(r, 1 - low, 1 + high))``;
with ``dual`` set, a token with ``A < 0`` loses at most ``dual * |A|``
(the dual clip of Ye et al., 2020), so a stale sample with a huge ratio
cannot dominate the step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from megaflow.train.algorithms.registry import register_policy_loss

if TYPE_CHECKING:
    from megaflow.train.algorithms.algorithm import Clip


@register_policy_loss("ppo")
def ppo(
    log_ratio: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor, clip: Clip
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token clipped loss and where a clip (PPO's or the dual one) was taken."""
    ratio = torch.exp(log_ratio.clamp(-clip.log_ratio_max, clip.log_ratio_max))
    plain = -adv * ratio
    bounded = -adv * torch.clamp(ratio, 1.0 - clip.low, 1.0 + clip.high)
    loss = torch.maximum(plain, bounded)
    taken = bounded > plain
    if clip.dual is not None:
        cap = -adv * clip.dual
        capped = (adv < 0) & (loss > cap)
        loss = torch.where(capped, cap.expand_as(loss), loss)
        taken = taken | capped
    return loss, taken


@register_policy_loss("gspo")
def gspo(
    log_ratio: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor, clip: Clip
) -> tuple[torch.Tensor, torch.Tensor]:
    """GSPO: one ratio per sequence, ``exp(mean of its token log ratios)``, clipped
    like PPO's; every token of the sequence carries the sequence's loss."""
    seq = (log_ratio * mask).sum(-1, keepdim=True) / mask.sum(-1, keepdim=True).clamp(min=1.0)
    loss, taken = ppo(seq, adv, mask, clip)
    return loss.expand_as(log_ratio), taken.expand_as(log_ratio)

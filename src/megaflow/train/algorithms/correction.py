"""Sampler/trainer mismatch correction: truncated importance sampling and IcePop.

The sampler (an inference engine, its kernels, its precision) and the
trainer do not give a token exactly the same probability. Under a
correction, the policy ratio is taken against the trainer's own logprobs at
the step's weights, and each token's loss is multiplied by the importance
weight ``w = pi_trainer / pi_sampler`` (detached):

* **TIS** (truncated importance sampling): ``min(w, cap)``.
* **IcePop**: ``w`` inside ``[low, high]``, else 0 (the token leaves the loss).

``level: sequence`` uses one weight per sequence, the product of its token
ratios. The tokens whose weight was capped or masked are counted per step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch


@dataclass(frozen=True, slots=True)
class Correction:
    kind: Literal["tis", "icepop"]
    low: float
    high: float
    level: Literal["token", "sequence"]

    def weights(self, log_w: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-token importance weights ``[B, T]`` from ``log(pi_trainer / pi_sampler)``
        ``[B, T]`` (detached), and which tokens were capped or masked."""
        if self.level == "sequence":
            log_w = (log_w * mask).sum(-1, keepdim=True)
        w = torch.exp(log_w.clamp(max=80.0))
        if self.kind == "tis":
            touched = w > self.high
            out = w.clamp(max=self.high)
        else:
            touched = (w < self.low) | (w > self.high)
            out = torch.where(touched, torch.zeros_like(w), w)
        return out.expand_as(mask), touched.expand_as(mask)

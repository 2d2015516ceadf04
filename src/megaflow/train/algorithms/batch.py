"""What a policy loss is given: scored samples, padded into one micro-batch.

A :class:`Scored` sample carries its advantage and its loss weight: the
weight of one of its tokens in the step's aggregated loss
(:func:`megaflow.train.algorithms.algorithm.loss_weights`), so the sums over
micro-batches and ranks add up to exactly the loss of one big batch.
:func:`collate` right-pads samples; the logit at position ``t`` predicts the
token at ``t + 1``, so a batch of ``T`` tokens yields ``T - 1`` predicted
positions and a completion token at position ``p`` is scored at ``p - 1``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from megaflow.train.samples import TrainingSample


@dataclass(frozen=True, slots=True)
class Scored:
    """A sample that takes part in the loss, with its advantage and loss weight."""

    sample: TrainingSample
    advantage: float
    weight: float = 0.0


@dataclass(frozen=True, slots=True)
class PaddedBatch:
    """Right-padded sequences and, per predicted position (``T - 1``), what to train."""

    input_ids: torch.Tensor  # [B, T]
    attention_mask: torch.Tensor  # [B, T]
    loss_mask: torch.Tensor  # [B, T-1] float, 1 where the next token is generated
    old_logprobs: torch.Tensor  # [B, T-1] the sampler's logprob of the next token
    advantages: torch.Tensor  # [B]
    weights: torch.Tensor  # [B] loss weight of each of the sample's tokens

    def to(self, device: torch.device) -> PaddedBatch:
        return PaddedBatch(*(getattr(self, f).to(device) for f in self.__dataclass_fields__))


def collate(items: Sequence[Scored], pad_id: int) -> PaddedBatch:
    """Pad ``items`` to one batch; a sample's completion index ``j`` lands at
    predicted position ``len(prompt) + j - 1``."""
    width = max(len(s.sample.tokens) for s in items)
    if width < 2:
        width = 2  # one token predicts nothing; keep the shapes non-empty
    b = len(items)
    ids = torch.full((b, width), pad_id, dtype=torch.long)
    attn = torch.zeros((b, width), dtype=torch.long)
    mask = torch.zeros((b, width - 1))
    old = torch.zeros((b, width - 1))
    for i, item in enumerate(items):
        s = item.sample
        toks = s.tokens
        ids[i, : len(toks)] = torch.tensor(toks, dtype=torch.long)
        attn[i, : len(toks)] = 1
        start = len(s.prompt_ids) - 1
        lo = max(start, 0)  # with no prompt the first token has no prediction
        cut = lo - start
        mask[i, lo : start + len(s.completion_ids)] = torch.tensor(
            s.loss_mask[cut:], dtype=torch.float
        )
        old[i, lo : start + len(s.completion_ids)] = torch.tensor(
            s.logprobs[cut:], dtype=torch.float
        )
    adv = torch.tensor([s.advantage for s in items], dtype=torch.float)
    weights = torch.tensor([s.weight for s in items], dtype=torch.float)
    return PaddedBatch(ids, attn, mask * attn[:, 1:], old, adv, weights)

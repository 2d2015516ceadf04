"""GRPO in plain torch: group advantages, token logprobs, the clipped loss.

Nothing here knows about processes or devices beyond the tensors it is
given; :mod:`megaflow.train.worker` runs it on one rank's micro-batches.

* **Advantages.** A sample's advantage is its reward minus the mean reward of
  its group, divided by the group's (population) standard deviation plus
  ``std_eps`` when ``scale_std``. Masked samples (infrastructure failures) are
  left out of the statistics and of the loss. A group whose unmasked rewards
  are all equal (or that has fewer than two) carries no signal: every sample
  in it gets advantage 0, so only the KL term (if any) moves it, and the step
  counts it in ``zero_advantage_groups``. A sample's ``weight`` (below 1
  for a stale sample the loop keeps) multiplies its advantage, which scales
  its policy term exactly: the clipped objective is linear in a non-negative
  factor of the advantage.
* **Logprobs.** Sequences are right-padded; the logit at position ``t``
  predicts the token at ``t + 1``, so a batch of ``T`` tokens yields ``T - 1``
  logprobs, and a completion token at position ``p`` is scored at ``p - 1``.
* **Loss.** Per trained token: ``max(-A * r, -A * clip(r, 1 - eps, 1 + eps_high))``
  with ``r = exp(logp - logp_sampler)``, plus ``kl_coef`` times the k3
  estimate ``exp(ref - logp) - (ref - logp) - 1``. Only tokens with loss
  mask 1 (what the model generated) count; observations never do. Each
  sample carries a weight that makes the sum over the whole step equal the
  chosen mean (:func:`sample_weights`), so micro-batches and ranks add up to
  exactly the loss of one big batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch

from megaflow.train.samples import TrainingSample


@dataclass(frozen=True, slots=True)
class Scored:
    """A sample that takes part in the loss, with its advantage and loss weight."""

    sample: TrainingSample
    advantage: float
    weight: float = 0.0


@dataclass(frozen=True, slots=True)
class Advantages:
    """The trainable samples of a step and what the groups' statistics left out."""

    scored: list[Scored]
    zero_advantage_groups: int
    masked_samples: int


def group_advantages(
    groups: Sequence[Sequence[TrainingSample]], *, scale_std: bool, std_eps: float
) -> Advantages:
    """Advantages of every unmasked sample that has a generated token."""
    scored: list[Scored] = []
    zero = masked = 0
    for group in groups:
        live = [s for s in group if not s.masked]
        masked += len(group) - len(live)
        rewards = torch.tensor([s.reward for s in live], dtype=torch.float64)
        if len(live) < 2 or bool((rewards == rewards[0]).all()):
            zero += 1
            adv = torch.zeros_like(rewards)
        else:
            adv = rewards - rewards.mean()
            if scale_std:
                adv = adv / (rewards.std(correction=0) + std_eps)
        scored += [Scored(s, float(a) * s.weight) for s, a in zip(live, adv.tolist(), strict=True)]
    return Advantages([s for s in scored if s.sample.generated], zero, masked)


def sample_weights(scored: Sequence[Scored], agg: Literal["token", "sequence"]) -> list[Scored]:
    """Give each sample the weight of one of its tokens in the step's mean loss:
    ``1 / all trained tokens`` ('token') or ``1 / (its tokens * samples)`` ('sequence')."""
    if not scored:
        return []
    total = sum(s.sample.generated for s in scored)
    n = len(scored)
    return [
        Scored(
            s.sample,
            s.advantage,
            1.0 / total if agg == "token" else 1.0 / (s.sample.generated * n),
        )
        for s in scored
    ]


@dataclass(frozen=True, slots=True)
class PaddedBatch:
    """Right-padded sequences and, per predicted position (``T - 1``), what to train."""

    input_ids: torch.Tensor  # [B, T]
    attention_mask: torch.Tensor  # [B, T]
    loss_mask: torch.Tensor  # [B, T-1] float, 1 where the next token is generated
    old_logprobs: torch.Tensor  # [B, T-1] the sampler's logprob of the next token
    advantages: torch.Tensor  # [B]
    weights: torch.Tensor  # [B]

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


def token_logprobs(
    model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """``[B, T-1]``: the log-probability under ``model`` of each next token."""
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1].float()
    if temperature != 1.0:
        logits = logits / temperature
    nxt = input_ids[:, 1:].unsqueeze(-1)
    out: torch.Tensor = logits.gather(-1, nxt).squeeze(-1) - torch.logsumexp(logits, dim=-1)
    return out


#: Order of the summed statistics :func:`grpo_loss` returns.
STAT_FIELDS = ("ratio", "clipped", "kl", "tokens", "loss")


def grpo_loss(
    logp: torch.Tensor,
    batch: PaddedBatch,
    *,
    clip_low: float,
    clip_high: float,
    kl_coef: float = 0.0,
    ref_logp: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch's share of the step loss (to backpropagate) and the sums of
    :data:`STAT_FIELDS` over its trained tokens (detached)."""
    mask = batch.loss_mask
    adv = batch.advantages.unsqueeze(-1)
    ratio = torch.exp(logp - batch.old_logprobs)
    plain = -adv * ratio
    clipped = -adv * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    per_token = torch.maximum(plain, clipped)
    kl = torch.zeros_like(logp)
    if ref_logp is not None:
        diff = ref_logp - logp
        kl = torch.exp(diff) - diff - 1.0
        per_token = per_token + kl_coef * kl
    loss = (per_token * mask * batch.weights.unsqueeze(-1)).sum()
    with torch.no_grad():
        sums = torch.stack(
            [
                (ratio * mask).sum(),
                ((clipped > plain).float() * mask).sum(),
                (kl * mask).sum(),
                mask.sum(),
                loss.detach(),
            ]
        )
    return loss, sums

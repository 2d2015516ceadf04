"""The policy's view of a padded batch: each next token's logprob, and the entropy.

The logit at position ``t`` scores the token at ``t + 1``. Logits are divided
by the sampling temperature, so the trainer's distribution is the one the
sampler drew from.
"""

from __future__ import annotations

from typing import Any

import torch


def _logits(
    model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, temperature: float
) -> torch.Tensor:
    out = model(input_ids=input_ids, attention_mask=attention_mask)
    logits: torch.Tensor = out.logits[:, :-1].float()
    return logits / temperature if temperature != 1.0 else logits


def token_logprobs(
    model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """``[B, T-1]``: the log-probability under ``model`` of each next token."""
    return logprobs_and_entropy(model, input_ids, attention_mask, temperature, entropy=False)[0]


def logprobs_and_entropy(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    temperature: float = 1.0,
    *,
    entropy: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``[B, T-1]`` next-token logprobs (with gradient) and ``[B, T-1]`` entropies of
    the next-token distribution (detached; zeros when ``entropy`` is false)."""
    logits = _logits(model, input_ids, attention_mask, temperature)
    logz = torch.logsumexp(logits, dim=-1)
    nxt = input_ids[:, 1:].unsqueeze(-1)
    logp = logits.gather(-1, nxt).squeeze(-1) - logz
    with torch.no_grad():
        if entropy:
            probs = torch.softmax(logits, dim=-1)
            ent = logz - (probs * logits).sum(-1)
        else:
            ent = torch.zeros_like(logp)
    return logp, ent

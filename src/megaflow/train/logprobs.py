"""The policy's view of a padded batch: each next token's logprob, and the entropy.

The logit at position ``t`` scores the token at ``t + 1``. Logits are divided
by the sampling temperature, so the trainer's distribution is the one the
sampler drew from.

A batch's prompts take no loss: :func:`first_scored` finds the first
predicted position any row trains, and the model is asked for logits from
there on only (Hugging Face's ``logits_to_keep``), which spares the output
layer, the log-softmax and the entropy over every prompt token (about two
fifths of the quickstart's positions). Positions before it come back as 0.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

_PARAMS: dict[type, frozenset[str]] = {}


def forward_params(model: Any) -> frozenset[str]:
    """The keyword names ``model``'s class's ``forward`` takes (cached per class)."""
    cls = type(model)
    if cls not in _PARAMS:
        try:
            _PARAMS[cls] = frozenset(inspect.signature(cls.forward).parameters)
        except (TypeError, ValueError, AttributeError):
            _PARAMS[cls] = frozenset()
    return _PARAMS[cls]


def keeps_logits(model: Any) -> bool:
    """Whether ``model`` takes ``logits_to_keep`` (Hugging Face causal LMs do)."""
    return "logits_to_keep" in forward_params(model)


def _unwrapped(model: Any) -> Any:
    """The module whose ``forward`` a DDP wrapper passes its keywords to."""
    return getattr(model, "module", model)


def first_scored(loss_mask: torch.Tensor) -> int:
    """The first predicted position (column of ``[B, T-1]``) any row trains; 0 if none."""
    cols = loss_mask.ne(0).any(0).nonzero()
    return int(cols[0]) if len(cols) else 0


def _logits(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    temperature: float,
    start: int,
) -> torch.Tensor:
    """Logits of predicted positions ``start .. T-2`` (``[B, T-1-start, V]``), or of
    all ``T-1`` when the model cannot keep fewer."""
    kw: dict[str, Any] = {}
    if start > 0 and keeps_logits(_unwrapped(model)):
        kw["logits_to_keep"] = input_ids.shape[1] - start
    out = model(input_ids=input_ids, attention_mask=attention_mask, **kw)
    logits: torch.Tensor = out.logits[:, :-1].float()
    return logits / temperature if temperature != 1.0 else logits


def score(
    logits: torch.Tensor, targets: torch.Tensor, *, entropy: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each target token's logprob under ``logits`` (``[B, N, V]`` against ``[B, N]``,
    with gradient) and the entropy of each position's distribution (detached; zeros
    when ``entropy`` is false)."""
    logz = torch.logsumexp(logits, dim=-1)
    logp = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - logz
    with torch.no_grad():
        if entropy:
            ent = logz - (torch.softmax(logits, dim=-1) * logits).sum(-1)
        else:
            ent = torch.zeros_like(logp)
    return logp, ent


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
    start: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``[B, T-1]`` next-token logprobs (with gradient) and ``[B, T-1]`` entropies of
    the next-token distribution (detached; zeros when ``entropy`` is false).
    Predicted positions before ``start`` are not computed and hold 0 in both
    (a model without ``logits_to_keep`` computes them all)."""
    logits = _logits(model, input_ids, attention_mask, temperature, start)
    skipped = input_ids.shape[1] - 1 - logits.shape[1]
    logp, ent = score(logits, input_ids[:, 1 + skipped :], entropy=entropy)
    if skipped:
        logp = torch.nn.functional.pad(logp, (skipped, 0))
        ent = torch.nn.functional.pad(ent, (skipped, 0))
    return logp, ent

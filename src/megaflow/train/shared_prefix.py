"""A micro-batch's shared prompts computed once: a GRPO group's samples share one.

The samples of a group answer the same prompt, so in a padded batch each of
them runs the prompt's tokens through every layer again (in the quickstart,
50 of about 120 tokens a sample, 4 samples a prompt). Causal attention makes
a prompt's hidden states and keys and values independent of what follows
it, so :func:`shared_logprobs` runs each distinct prompt once, with its
keys and values kept (Hugging Face's KV cache, with gradient), gives every
row a view of its prompt's cache, and runs only the completions on top.
The logprobs, the entropy and the gradient are those of the whole batch
(to float rounding: ``tests/train/test_shared_prefix.py``); the backward
pass sums each prompt's gradient over the rows that share it, as the whole
batch's would.

Prompts are left-padded so that every completion starts at the same column;
position ids come from the attention mask, so a row's positions are those
it has unpadded. The result has :func:`~megaflow.train.logprobs.logprobs_and_entropy`'s
layout (``[B, T-1]`` of the right-padded batch, a completion token ``j`` of
a row with a prompt of ``P`` tokens at predicted position ``P - 1 + j``),
zeros elsewhere. The trainer uses it on one rank only: DDP and FSDP expect
one forward per backward.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from megaflow.train.algorithms.batch import PaddedBatch, Scored
from megaflow.train.logprobs import forward_params, keeps_logits, score


@dataclass(frozen=True, slots=True)
class SharedPrompts:
    """A micro-batch's distinct prompts and, for each row, the index of its own."""

    prompts: list[list[int]]
    rows: list[int]
    completions: list[list[int]]


def share_prompts(items: Sequence[Scored]) -> SharedPrompts | None:
    """The distinct prompts of ``items``; None when no two rows share a prompt (or a
    row has none), as then nothing is saved."""
    index: dict[tuple[int, ...], int] = {}
    rows: list[int] = []
    for item in items:
        prompt = tuple(item.sample.prompt_ids)
        if not prompt or not item.sample.completion_ids:
            return None
        rows.append(index.setdefault(prompt, len(index)))
    if len(index) == len(rows):
        return None
    return SharedPrompts(
        [list(p) for p in index], rows, [list(i.sample.completion_ids) for i in items]
    )


def supports(model: Any) -> bool:
    """Whether ``model``'s forward takes a KV cache and position ids (Hugging Face
    causal LMs do)."""
    params = forward_params(model)
    return "position_ids" in params and bool({"cache", "past_key_values"} & params)


def _padded(seqs: Sequence[Sequence[int]], pad: int, *, left: bool) -> tuple[Any, Any]:
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        span = slice(width - len(s), width) if left else slice(0, len(s))
        ids[i, span] = torch.tensor(list(s), dtype=torch.long)
        mask[i, span] = 1
    return ids, mask


def shared_logprobs(
    model: Any,
    batch: PaddedBatch,
    shared: SharedPrompts,
    pad_id: int,
    temperature: float = 1.0,
    *,
    entropy: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch``'s next-token logprobs (with gradient) and entropies (detached; zeros
    when ``entropy`` is false), ``[B, T-1]``, each distinct prompt run once."""
    device = batch.input_ids.device
    cache_kw = "cache" if "cache" in forward_params(model) else "past_key_values"
    p_ids, p_mask = (t.to(device) for t in _padded(shared.prompts, pad_id, left=True))
    p_pos = (p_mask.cumsum(-1) - 1).clamp(min=0)
    keep = {"logits_to_keep": 1} if keeps_logits(model) else {}
    first = model(
        input_ids=p_ids, attention_mask=p_mask, position_ids=p_pos, use_cache=True, **keep
    )
    cache = getattr(first, "cache", None) or first.past_key_values
    rows = torch.tensor(shared.rows, device=device)
    cache.batch_select_indices(rows)  # each row's view of its prompt's keys and values
    c_ids, c_mask = (t.to(device) for t in _padded(shared.completions, pad_id, left=False))
    width = c_ids.shape[1]
    c_pos = p_pos[rows][:, -1:] + 1 + torch.arange(width, device=device)
    rest = model(
        input_ids=c_ids,
        attention_mask=torch.cat([p_mask[rows], c_mask], 1),
        position_ids=c_pos,
        use_cache=True,
        **{cache_kw: cache},
    )
    # the prompt's last logit scores the first completion token, then each completion one
    logits = torch.cat([first.logits[rows][:, -1:], rest.logits[:, :-1]], 1).float()
    if temperature != 1.0:
        logits = logits / temperature
    logp, ent = score(logits, c_ids, entropy=entropy)
    logp, ent = logp * c_mask, ent * c_mask
    # into the right-padded batch's layout; a row's padding adds 0 at a clamped position
    plen = torch.tensor([len(shared.prompts[r]) for r in shared.rows], device=device)
    where = (plen[:, None] - 1 + torch.arange(width, device=device)).clamp(
        max=batch.input_ids.shape[1] - 2
    )
    shape = (batch.input_ids.shape[0], batch.input_ids.shape[1] - 1)
    out = torch.zeros(shape, device=device).scatter_add(1, where, logp)
    ents = torch.zeros(shape, device=device).scatter_add(1, where, ent)
    return out, ents

"""How one step's samples are split across ranks and into micro-batches.

Every rank receives the whole step and computes the same plan, so no rank
needs to be told its share. Samples are sorted longest first (ties keep
their order) and dealt round-robin, which balances tokens across ranks and
keeps similar lengths together (less padding). Under FSDP every forward and
backward is a collective, so every rank must run the same number of
micro-batches: :func:`plan` pads the short ranks with ``None``, which the
worker runs as a pass of weight zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from megaflow.train.algorithms.batch import Scored
from megaflow.train.samples import TrainingSample


def micro_batches(
    items: Sequence[Scored], size: int, unit: Literal["samples", "tokens"]
) -> list[list[Scored]]:
    """Consecutive chunks of ``items``: ``size`` samples each, or as many as fit
    in ``size`` padded tokens (a longer sample alone)."""
    if unit == "samples":
        return [list(items[i : i + size]) for i in range(0, len(items), size)]
    out: list[list[Scored]] = []
    cur: list[Scored] = []
    width = 0
    for item in items:
        n = len(item.sample.tokens)
        if cur and max(width, n) * (len(cur) + 1) > size:
            out.append(cur)
            cur, width = [], 0
        cur.append(item)
        width = max(width, n)
    if cur:
        out.append(cur)
    return out


def plan(
    scored: Sequence[Scored],
    *,
    world_size: int,
    size: int,
    unit: Literal["samples", "tokens"],
) -> list[list[list[Scored] | None]]:
    """Per rank, its micro-batches; every rank's list has the same length."""
    order = sorted(scored, key=lambda s: -len(s.sample.tokens))
    per_rank = [micro_batches(order[r::world_size], size, unit) for r in range(world_size)]
    n = max(len(m) for m in per_rank)
    return [[*m, *([None] * (n - len(m)))] for m in per_rank]


def pad_sample(pad_id: int) -> Scored:
    """A pass that trains nothing, for a rank with fewer micro-batches than the rest."""
    s = TrainingSample(
        sample_id="pad",
        group_id="pad",
        run_id="pad",
        prompt_ids=[pad_id],
        completion_ids=[pad_id],
        logprobs=[0.0],
        loss_mask=[0],
    )
    return Scored(s, 0.0, 0.0)

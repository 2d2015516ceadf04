"""A run's progress by task type, with the total known from the start where it can be.

A train run submits its samples step by step and its held-out rounds as they
come, so counting the tasks in the store gives a total that grows (227/256,
then 352/352). Here each type's total is what the run plans, from its stored
config (:meth:`~megaflow.train.loop_config.TrainingConfig.train_samples` and
:meth:`~megaflow.train.loop_config.TrainingConfig.heldout_rounds`): the
train samples exactly (dynamic sampling's refills come on top, and the total
then follows the store), the held-out samples as rounds x the size of a
round once the first round is submitted (its tasks name their round:
``<inc>.e00000.<task>/<n>``, greedy ``<inc>.e00000g.<task>/0``). Each type
says whether its total is ``planned`` or only ``submitted`` so far, and the
page prints which.
"""

from __future__ import annotations

import re
from typing import Any

from megaflow.config import parse_config
from megaflow.core.errors import MegaFlowError
from megaflow.core.tasks import RunSpec, TaskRecord
from megaflow.train.loop_config import TrainingConfig

_HELDOUT_ROUND = re.compile(r"/[0-9a-f]+\.e(\d{5})(g?)\.")


def _train_config(run: RunSpec) -> tuple[TrainingConfig, int] | None:
    """The run's ``train:`` section and ``samples``; None for a run without one."""
    try:
        cfg = parse_config(run.config, f"run {run.id}")
    except MegaFlowError:
        return None
    return None if cfg.train is None else (cfg.train, cfg.samples)


def _heldout(tc: TrainingConfig, evals: list[TaskRecord]) -> tuple[int, str] | None:
    """(planned held-out samples, a note of the rounds), or None before the first
    round is submitted. A round is its sampled tasks (tasks x eval_samples) and, with
    eval_greedy, one greedy sample of each task, submitted after the sampled ones."""
    sampled: dict[str, int] = {}
    for rec in evals:
        if (m := _HELDOUT_ROUND.search(rec.id)) and not m.group(2):
            sampled[m.group(1)] = sampled.get(m.group(1), 0) + 1
    if not sampled:
        return None
    first = sampled[min(sampled)]
    per_round = first + (first // tc.eval_samples if tc.eval_greedy else 0)
    rounds = tc.heldout_rounds()
    return rounds * per_round, f"{len(sampled)} of {rounds} held-out rounds submitted"


def progress_by_type(run: RunSpec, by_type: dict[str, list[TaskRecord]]) -> dict[str, Any]:
    """Per task type: done (terminal), total, and whether that total is ``planned`` (known
    from the start) or ``submitted`` (the tasks in the store so far)."""
    got = _train_config(run)
    out: dict[str, Any] = {}
    for kind, recs in by_type.items():
        done = sum(1 for r in recs if r.state.terminal)
        total, basis, note = len(recs), "submitted", ""
        if got is not None and kind == "train":
            total, basis = max(got[0].train_samples(got[1]), total), "planned"
        held = _heldout(got[0], recs) if got is not None and kind == "eval" else None
        if held is not None:
            total, basis, note = max(held[0], total), "planned", held[1]
        out[kind] = {"done": done, "total": total, "basis": basis, "note": note}
    return out

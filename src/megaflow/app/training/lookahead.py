"""Whether the scheduler lets the async loop's lookahead rounds run beside the trained one.

In ``async`` mode the loop keeps the rounds of the next ``lookahead`` steps
queued while it collects and trains a step (:meth:`TrainingConfig.ahead`), up
to ``(1 + lookahead) x prompts_per_step x samples`` tasks. The scheduler runs
at most ``scheduler.max_concurrency`` of them at once, in order. With fewer
slots than that, a lookahead round's task starts only as one of the round
being trained ends: sampling then overlaps that round's tail and the
trainer's step, never a whole round, and the async loop is little faster
than the sync one wherever the rollouts could have run side by side (engines
and sandboxes with room to spare). :func:`starved_lookahead` says so, naming
the field, and the loop prints it when it starts; it is not an error, since a
machine without room for more tasks (a few CPU cores shared by sandboxes,
engines and the trainer) gains nothing from more slots.
"""

from __future__ import annotations

from megaflow.config.models import RunConfig


def tasks_in_flight(cfg: RunConfig) -> int:
    """The most train tasks the loop keeps queued at once (refill rounds aside)."""
    tc = cfg.train
    if tc is None:
        return 0
    return (1 + tc.ahead) * tc.prompts_per_step * cfg.samples


def starved_lookahead(cfg: RunConfig) -> str | None:
    """A line saying the scheduler cannot run the async lookahead beside the trained
    round, or None (sync mode, or enough slots)."""
    tc = cfg.train
    if tc is None or tc.mode != "async":
        return None
    want, cap = tasks_in_flight(cfg), cfg.scheduler.max_concurrency
    if cap >= want:
        return None
    step = tc.prompts_per_step * cfg.samples
    return (
        f"note: train.lookahead {tc.ahead} keeps up to {want} tasks in flight "
        f"({1 + tc.ahead} rounds of {step}), but scheduler.max_concurrency {cap} runs "
        f"{cap} at once: the next rounds start only as the trained round's tasks end, so "
        f"sampling overlaps only its tail; set scheduler.max_concurrency to {want} if the "
        f"sandboxes and engines have room"
    )

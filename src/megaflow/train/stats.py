"""What one optimizer step did, as the trainer reports it.

Torch-free, so the loop, the CLI and exports can read it without the
``train`` extra.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class RankTiming:
    """Where one rank's step time went (``docs/train.md``, diagnosis)."""

    compute_s: float  # forward and backward (with the collectives overlapped in them), update
    comm_s: float  # collectives after backward: sharded gradient norm, 1-bit Adam's exchange
    idle_s: float  # waiting for the slowest rank before those collectives


@dataclass(frozen=True, slots=True)
class StepStats:
    """One step of :class:`megaflow.train.trainer.Trainer`; token figures are over
    the trained tokens of every rank."""

    step: int  # optimizer steps taken so far, this one included
    weights_version: int  # the version of the weights after the step
    updated: bool  # False when the step changed nothing (no trainable token, or no signal)
    loss: float  # the step's aggregated loss
    mean_ratio: float  # mean ratio pi_trainer / pi_sampler over trained tokens
    clip_fraction: float  # share of trained tokens whose clip (PPO's or dual) was taken
    kl: float  # mean k3 KL to the reference model (0 without one)
    grad_norm: float  # global gradient norm before clipping
    tokens: int  # trained (generated) tokens
    samples: int  # samples that took part in the loss
    groups: int  # groups given
    zero_advantage_groups: int  # groups whose unmasked rewards were all equal
    masked_samples: int  # samples left out as infrastructure failures
    seconds: float  # wall time of the step
    lr: float = 0.0  # the learning rate the step used (after lr_scaling)
    warmup_skipped_groups: int = 0  # groups the batch-size warm-up left out
    ranks: tuple[RankTiming, ...] = ()  # per rank, in rank order; () when nothing trained
    groups_with_signal: int = 0  # groups with a trained sample of non-zero advantage
    skipped_without_signal: bool = False  # trainable tokens, but no signal: no step taken
    filtered_groups: int = 0  # zero-advantage groups left out by dynamic sampling
    overlong_filtered: int = 0  # truncated samples left out by the overlong filter
    mismatch: float = 0.0  # mean k3 KL(sampler || trainer) over trained tokens
    corrected_fraction: float = 0.0  # trained tokens whose TIS/IcePop weight was cut
    entropy: float = 0.0  # mean entropy of the policy's next-token distribution
    response_length: float = 0.0  # mean generated tokens of the live samples
    truncation_rate: float = 0.0  # share of live samples cut off at the token limit

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)  # ranks become a list of dicts

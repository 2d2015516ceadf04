"""The trainer's config: optimizer, GRPO loss, distribution and checkpoints.

:class:`TrainerConfig` is the ``train:`` section of a run config (the loop
adds its own fields there). It describes one GRPO update: the advantage of a
sample is its reward minus its group's mean (optionally divided by the
group's standard deviation), the policy term is PPO's clipped importance
ratio against the logprobs the sampler recorded, an optional KL penalty
pulls towards a frozen copy of the initial model, and the per-token losses
are averaged over tokens or over sequences. See ``docs/train.md``.

This module imports neither torch nor transformers.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class TrainerConfig(BaseModel):
    """One GRPO trainer: what an optimizer step does and where it runs."""

    model_config = ConfigDict(extra="forbid")

    lr: float = Field(1e-6, gt=0, description="AdamW learning rate.")
    betas: tuple[float, float] = Field(
        (0.9, 0.999), description="AdamW (beta1, beta2): decay of the gradient moments."
    )
    weight_decay: float = Field(0.0, ge=0, description="AdamW decoupled weight decay.")
    adam_eps: float = Field(1e-8, gt=0, description="AdamW epsilon added to the denominator.")
    grad_clip: float | None = Field(
        1.0, gt=0, description="Clip the global gradient norm to this value; None: no clipping."
    )
    micro_batch: int = Field(
        4, ge=1, description="Size of one forward/backward pass, in `micro_batch_unit`s per rank."
    )
    micro_batch_unit: Literal["samples", "tokens"] = Field(
        "samples",
        description="'samples': that many sequences per pass; 'tokens': as many sequences as "
        "fit in that many padded tokens (a longer sequence gets a pass of its own).",
    )
    scale_std: bool = Field(
        True, description="Divide each advantage by its group's reward standard deviation."
    )
    std_eps: float = Field(
        1e-6, gt=0, description="Added to the standard deviation before dividing by it."
    )
    clip_eps: float = Field(
        0.2, gt=0, description="Lower clip of the importance ratio: 1 - clip_eps."
    )
    clip_eps_high: float | None = Field(
        None, gt=0, description="Upper clip of the ratio: 1 + clip_eps_high; None: clip_eps."
    )
    kl_coef: float = Field(
        0.0,
        ge=0,
        description="Weight of the k3 KL estimate to a frozen reference model (the initial "
        "weights); 0 disables it and no reference model is loaded.",
    )
    loss_agg: Literal["token", "sequence"] = Field(
        "token",
        description="'token': mean over every trained token of the step (DAPO); 'sequence': "
        "mean over each sequence's tokens, then over sequences (the GRPO paper).",
    )
    temperature: float = Field(
        1.0,
        gt=0,
        description="The rollouts' sampling temperature; logits are divided by it so the "
        "ratio compares the same distribution the sampler drew from.",
    )
    dropout: bool = Field(
        False,
        description="Keep the model's dropout active in the update; off by default, since the "
        "ratio against the sampler's logprobs assumes the same network.",
    )
    world_size: int = Field(1, ge=1, description="Number of trainer ranks (processes).")
    backend: Literal["auto", "gloo", "nccl"] = Field(
        "auto", description="Process-group backend; 'auto': NCCL when CUDA is available, else gloo."
    )
    timeout_s: float = Field(
        600, gt=0, description="Longest wait for a collective before a rank gives up."
    )
    checkpoint_every: int = Field(
        10, ge=0, description="Checkpoint every this many optimizer steps; 0: never."
    )
    checkpoint_prefix: str = Field(
        "train/checkpoints", min_length=1, description="Artifact-store key prefix of checkpoints."
    )
    keep_checkpoints: int = Field(
        2, ge=1, description="Complete checkpoints kept; older ones are deleted after a save."
    )
    seed: int = Field(0, description="Seed of every rank's random generators (plus its rank).")

    @property
    def clip_high(self) -> float:
        return self.clip_eps if self.clip_eps_high is None else self.clip_eps_high

"""The trainer's config: optimizer, RL algorithm, distribution and checkpoints.

:class:`TrainerConfig` is the ``train:`` section of a run config (the loop
adds its own fields there). It describes one update: ``algorithm`` picks the
advantage estimator and policy loss (GRPO by default; see
:mod:`megaflow.train.algorithms.config`), an optional KL penalty pulls
towards a frozen copy of the initial model, and a step in which no sample
carries a non-zero advantage changes nothing unless ``step_without_signal``.
How the ranks share the model (``strategy``), where they run (``launcher``),
the optimizer (AdamW or 1-bit Adam), the learning-rate and batch-size
schedules, checkpoint timing and the metrics log are fields too.
See ``docs/train.md`` and ``docs/train-scale.md``.

This module imports neither torch nor transformers.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from megaflow.train.algorithms.config import AlgorithmConfig, GrpoConfig
from megaflow.train.launcher_config import LauncherConfig, LocalLauncherConfig
from megaflow.train.plan_config import Hardware

Strategy = Literal["fsdp", "auto", "ddp", "zero2", "zero3", "hsdp", "zero3_offload"]
#: Strategies under which every rank holds whole, unaveraged gradients (1-bit Adam's need).
UNSHARDED = ("ddp", "auto")
#: The loss knobs that were ``train.*`` fields and are now ``train.algorithm.*``.
MOVED = ("scale_std", "std_eps", "clip_eps", "clip_eps_high", "loss_agg")


class TrainerConfig(BaseModel):
    """One RL trainer: what an optimizer step does and where it runs."""

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
    shared_prefix: bool = Field(
        True,
        description="On one rank, run each distinct prompt of a micro-batch once and let the "
        "samples that share it (a GRPO group's) attend to its keys and values: the same "
        "logprobs and gradient, fewer tokens through the model. False: every sample whole.",
    )
    algorithm: AlgorithmConfig = Field(
        default_factory=GrpoConfig,
        description="The advantage estimator and policy loss: {type: grpo} (the default), "
        "dr_grpo, dapo, gspo, rloo or reinforce_pp, with their knobs "
        "(megaflow.train.algorithms.config).",
    )
    step_without_signal: bool = Field(
        False,
        description="Take an optimizer step (and a new weights version) even when no trained "
        "sample has a non-zero advantage; off: such a step leaves the weights and version "
        "as they were (with momentum the optimizer would still move them).",
    )
    kl_coef: float = Field(
        0.0,
        ge=0,
        description="Weight of the k3 KL estimate to a frozen reference model (the initial "
        "weights); 0 disables it and no reference model is loaded.",
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
    launcher: LauncherConfig = Field(
        default_factory=LocalLauncherConfig,
        description="Where the ranks run: 'local' processes (or torchrun), or 'ray' actors "
        "of a Ray cluster (megaflow.train.launcher_config).",
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
    strategy: Strategy = Field(
        "fsdp",
        description="How several ranks share the model: 'fsdp' FSDP2 full sharding of every "
        "block and the whole model (the default); 'auto' the sharding planner's choice from "
        "the model's parameter count and this machine (reported when the trainer starts); "
        "'ddp', 'zero2', 'zero3', 'hsdp', 'zero3_offload' as in docs/train-scale.md. "
        "Ignored with one rank.",
    )
    devices_per_node: int | None = Field(
        None,
        ge=1,
        description="Ranks per node, for 'hsdp' and the planner; None: LOCAL_WORLD_SIZE "
        "under torchrun, else every rank on one node.",
    )
    hardware: Hardware | None = Field(
        None,
        description="'auto': the hardware the planner assumes (device memory, links); "
        "None: this machine's memory per rank and the planner's default links.",
    )
    plan_seq_len: int = Field(
        2048, ge=1, description="'auto': the sequence length the planner counts activations for."
    )
    optimizer: Literal["adamw", "onebit_adam"] = Field(
        "adamw",
        description="'adamw', or 'onebit_adam' (1-bit Adam: momentum exchanged as signs after "
        "a warm-up; needs whole gradients, so strategy 'ddp' or 'auto' with several ranks).",
    )
    onebit_warmup_steps: int = Field(
        100, ge=1, description="1-bit Adam: steps of full-precision Adam before compression."
    )
    onebit_block: int = Field(
        1024, ge=8, multiple_of=8, description="1-bit Adam: elements sharing one scale."
    )
    lr_scaling: Literal["none", "linear", "sqrt"] = Field(
        "none",
        description="Scale `lr` with the step's global batch (samples trained) against "
        "`lr_base_batch`: linearly, by the square root, or not at all.",
    )
    lr_base_batch: int = Field(
        64, ge=1, description="The global batch (samples) at which `lr` applies unscaled."
    )
    batch_warmup_steps: int = Field(
        0,
        ge=0,
        description="Over the first K steps, train on the first ceil(n * k / K) of the n "
        "groups given at step k (the rest are left out and counted); 0: off.",
    )
    checkpoint_every_s: float | None = Field(
        None,
        gt=0,
        description="Also checkpoint when this many seconds passed since the last save "
        "(or the start); None: by steps only.",
    )
    async_checkpoint: bool = Field(
        False,
        description="Write and upload a checkpoint in the background after its state is "
        "copied, so training continues meanwhile; one save in flight at a time.",
    )
    metrics_path: str | None = Field(
        None,
        description="Append every step's statistics and per-rank timings to this JSON-lines "
        "file from a background thread (`megaflow train diagnose` reads it); None: no log.",
    )

    @model_validator(mode="before")
    @classmethod
    def _moved_to_algorithm(cls, data: Any) -> Any:
        moved = sorted(set(data) & set(MOVED)) if isinstance(data, dict) else []
        if moved:
            raise ValueError(
                "; ".join(f"train.{k} moved to train.algorithm.{k}" for k in moved)
                + " (e.g. train.algorithm: {type: grpo, clip_eps: 0.2}); "
                "see docs/train-loop.md, Algorithms"
            )
        return data

    @model_validator(mode="after")
    def _onebit_needs_whole_gradients(self) -> TrainerConfig:
        sharded = self.strategy not in UNSHARDED
        if self.optimizer == "onebit_adam" and self.world_size > 1 and sharded:
            raise ValueError(
                f"optimizer onebit_adam cannot run under strategy {self.strategy!r}: "
                "sharding averages gradients in full precision before the optimizer "
                "sees them; use strategy 'ddp' (or 'auto')"
            )
        return self

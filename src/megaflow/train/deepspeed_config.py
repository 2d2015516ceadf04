"""A DeepSpeed config equivalent to a plan, for GPU users who train with DeepSpeed.

``megaflow plan CONFIG --deepspeed FILE`` writes it. The plan's strategy
becomes the ZeRO stage (ddp 0, zero2 2, zero3 and hsdp 3, zero3_offload 3
with parameters and optimizer state offloaded to the CPU); the optimizer is
AdamW, or DeepSpeed's ``OneBitAdam`` with ``freeze_step`` set to the 1-bit
Adam warm-up. OneBitAdam gets stage 0 for the reason the built-in one
refuses FSDP: it compresses each rank's whole momentum. For hsdp the nearest
equivalent is ZeRO++'s hierarchical partitioning (weights gathered inside a
node; the moments stay sharded over every rank). A pipeline plan has
no DeepSpeed config equivalent (DeepSpeed takes its stages from a
``PipelineModule`` in code), so it is refused.

This module imports neither torch nor deepspeed.
"""

from __future__ import annotations

from typing import Any

from megaflow.core.errors import ConfigError
from megaflow.train.plan_config import PlanConfig
from megaflow.train.planner import Estimate

_STAGE = {"ddp": 0, "zero2": 2, "zero3": 3, "hsdp": 3, "zero3_offload": 3}


def deepspeed_config(
    cfg: PlanConfig, choice: Estimate, *, lr: float = 1e-6, warmup_steps: int = 100
) -> dict[str, Any]:
    """The DeepSpeed JSON config (as a dict) of ``choice`` for ``cfg``."""
    if choice.strategy not in _STAGE:
        raise ConfigError(
            f"a {choice.strategy} plan has no DeepSpeed config equivalent: DeepSpeed's "
            "pipeline stages are set in code (PipelineModule)"
        )
    onebit = cfg.optimizer == "onebit_adam"
    if onebit and _STAGE[choice.strategy] != 0:
        raise ConfigError(f"OneBitAdam needs ZeRO stage 0 (ddp), not a {choice.strategy} plan")
    params: dict[str, Any] = {"lr": lr, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.0}
    if onebit:
        params |= {"freeze_step": warmup_steps, "cuda_aware": False, "comm_backend_name": "nccl"}
    zero: dict[str, Any] = {"stage": _STAGE[choice.strategy]}
    if choice.strategy == "zero3_offload":
        zero |= {"offload_param": {"device": "cpu"}, "offload_optimizer": {"device": "cpu"}}
    if choice.strategy == "hsdp":
        zero |= {"zero_hpz_partition_size": cfg.hardware.devices_per_node}
    return {
        "train_micro_batch_size_per_gpu": cfg.batch.micro_batch,
        "gradient_accumulation_steps": cfg.batch.micro_batches,
        "optimizer": {"type": "OneBitAdam" if onebit else "AdamW", "params": params},
        "zero_optimization": zero,
        "bf16": {"enabled": cfg.precision == "bf16"},
    }

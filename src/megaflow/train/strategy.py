"""Which sharding strategy the trainer's ranks use: the config's, or the planner's.

``strategy: auto`` asks :mod:`megaflow.train.planner` for a plan from the
model directory's ``config.json`` (its parameter count and shape, no
weights read), the trainer's micro-batch, ``plan_seq_len`` and the hardware:
the config's ``hardware`` if given, else this machine (the memory of a GPU,
or on CPU ranks the available host memory shared by the ranks of a node,
and the planner's default link bandwidths). The trainer runs ``ddp``,
``zero2``, ``zero3``, ``hsdp`` and ``zero3_offload``; a plan choosing
``pipeline`` (the GRPO trainer does not run the pipeline schedules) or
nothing at all is refused with the planner's reasons. Any other ``strategy``
is used as given. One rank shards nothing.

:func:`resolve` runs on rank 0 (and under ``torchrun`` on every rank, which
then take rank 0's answer), before the model is loaded.

This module imports neither torch nor transformers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from megaflow.core.errors import ConfigError
from megaflow.train.config import TrainerConfig
from megaflow.train.plan_config import GB, BatchShape, Hardware, PlanConfig
from megaflow.train.planner import plan

#: What the worker can apply (``pipeline`` is the planner's, not the GRPO trainer's).
RUNNABLE = ("fsdp", "ddp", "zero2", "zero3", "hsdp", "zero3_offload")


@dataclass(frozen=True, slots=True)
class Resolved:
    """The strategy the ranks apply and why."""

    strategy: str  # one of RUNNABLE, or "none" with one rank
    reasons: list[str] = field(default_factory=list)
    predicted_bytes: float | None = None  # the planner's peak per device, for "auto"

    def describe(self) -> str:
        if self.predicted_bytes is None:
            return f"strategy {self.strategy}"
        return f"strategy {self.strategy} (planner: {self.predicted_bytes / GB:.2f} GB per device)"


def available_host_gb() -> float:
    """Host memory a new allocation can get now (``MemAvailable``), in GB."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024 / GB
    except OSError:
        pass
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / GB


def ranks_per_node(config: TrainerConfig, world: int) -> int:
    if config.devices_per_node is not None:
        return config.devices_per_node
    local = os.environ.get("LOCAL_WORLD_SIZE")
    return int(local) if local else world


def machine(world: int, per_node: int, gpu_memory_gb: float | None) -> Hardware:
    """This machine as the planner sees it: a GPU's memory, or a share of the host's."""
    if world % per_node:
        raise ConfigError(
            f"train.devices_per_node: {world} ranks are not whole nodes of {per_node}",
            [("train.devices_per_node", f"must divide world_size {world}")],
        )
    if gpu_memory_gb is not None:
        return Hardware(
            device_memory_gb=gpu_memory_gb, devices_per_node=per_node, nodes=world // per_node
        )
    return Hardware(
        device_memory_gb=available_host_gb() / per_node,
        devices_per_node=per_node,
        nodes=world // per_node,
        overhead_gb=0.0,
    )


def plan_config(model_dir: Path, config: TrainerConfig, hardware: Hardware) -> PlanConfig:
    micro = config.micro_batch if config.micro_batch_unit == "samples" else 1
    seq = config.plan_seq_len
    if config.micro_batch_unit == "tokens":
        seq = min(seq, config.micro_batch)
    return PlanConfig.model_validate(
        {
            "model": {"path": str(model_dir)},  # config.json gives the shape
            "batch": BatchShape(micro_batch=micro, seq_len=seq),
            "hardware": hardware,
            "precision": "fp32",  # the trainer trains in float32
            "optimizer": config.optimizer,
        }
    )


def resolve(
    model_dir: Path, config: TrainerConfig, world: int, gpu_memory_gb: float | None = None
) -> Resolved:
    """The strategy of ``config`` on ``world`` ranks; ConfigError when ``auto`` finds
    nothing the trainer can run."""
    if world == 1:
        return Resolved("none", ["one rank: nothing to shard"])
    if config.strategy != "auto":
        return Resolved(config.strategy, [f"{config.strategy}: asked for by train.strategy"])
    hardware = config.hardware or machine(world, ranks_per_node(config, world), gpu_memory_gb)
    try:
        result = plan(plan_config(model_dir, config, hardware))
    except ValueError as exc:  # the model directory's config.json lacks a shape field
        raise ConfigError(
            f"train.strategy auto: cannot plan for {model_dir}: {exc}",
            [("train.strategy", "the model's shape is unknown; name a strategy")],
        ) from None
    choice = result.choice
    if choice is None or choice.strategy not in RUNNABLE:
        what = "nothing fits" if choice is None else f"the planner chose {choice.strategy}"
        raise ConfigError(
            f"train.strategy auto: {what}, which the trainer cannot run ("
            + "; ".join(result.reasons)
            + "); name a strategy or change the hardware",
            [("train.strategy", what)],
        )
    return Resolved(choice.strategy, result.reasons, choice.device_bytes)

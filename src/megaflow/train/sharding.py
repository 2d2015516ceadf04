"""Apply a planner strategy to a transformers model on the current process group.

:func:`shard` wraps a model the way :mod:`megaflow.train.planner` assumed
when it predicted the memory: ``ddp`` with gradients as views of DDP's
buckets; ``zero2`` / ``zero3`` / ``hsdp`` / ``zero3_offload`` with FSDP2
(``fully_shard``) on every block the model declares unsplittable and then
on the whole model, resharded after forward or not, on a 1-D mesh or (hsdp)
a (nodes, devices per node) mesh that replicates across nodes and shards
within one. ``fsdp`` is the trainer's default: ``fully_shard`` with its own
defaults (full sharding on a 1-D mesh of every rank) on each block, if the
model declares any, and on the whole model. ``pipeline`` is
:mod:`megaflow.train.pipeline`'s.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard
from torch.nn.parallel import DistributedDataParallel

from megaflow.core.errors import ConfigError

STRATEGIES = ("fsdp", "ddp", "zero2", "zero3", "hsdp", "zero3_offload")


def blocks(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The modules of the classes the model lists in ``_no_split_modules`` (its blocks)."""
    names = set(getattr(model, "_no_split_modules", None) or [])
    found = [m for m in model.modules() if type(m).__name__ in names]
    if not found:
        raise ConfigError(f"{type(model).__name__} declares no blocks (_no_split_modules)")
    return found


def shard(
    model: torch.nn.Module,
    strategy: str,
    *,
    devices_per_node: int = 1,
    compute_dtype: torch.dtype | None = None,
) -> Any:
    """``model`` wrapped for ``strategy``; call on every rank, in the same order."""
    if strategy not in STRATEGIES:
        raise ConfigError(f"strategy {strategy!r}: expected one of {', '.join(STRATEGIES)}")
    if strategy == "ddp":
        return DistributedDataParallel(model, gradient_as_bucket_view=True)
    if strategy == "fsdp":
        names = set(getattr(model, "_no_split_modules", None) or ())
        for module in model.modules():
            if type(module).__name__ in names:
                fully_shard(module)
        fully_shard(model)
        return model
    world = dist.get_world_size()
    device = next(model.parameters()).device.type
    if strategy == "hsdp":
        if world % devices_per_node:
            raise ConfigError(f"hsdp: {world} ranks are not whole nodes of {devices_per_node}")
        mesh = init_device_mesh(
            device, (world // devices_per_node, devices_per_node), mesh_dim_names=("rep", "shard")
        )
    else:
        mesh = init_device_mesh(device, (world,))
    kw: dict[str, Any] = {"mesh": mesh, "reshard_after_forward": strategy != "zero2"}
    if compute_dtype is not None:
        policy = MixedPrecisionPolicy(param_dtype=compute_dtype, reduce_dtype=torch.float32)
        kw["mp_policy"] = policy
    if strategy == "zero3_offload":
        kw["offload_policy"] = CPUOffloadPolicy()
    for block in blocks(model):
        fully_shard(block, **kw)
    fully_shard(model, **kw)
    return model

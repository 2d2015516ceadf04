"""The wire form of a broadcast weight update, shared by trainer and engines.

The ``broadcast`` weight sync (:mod:`megaflow.train.weight_sync.broadcast`)
and every engine that takes weights from it (MegaFlow's own, the vLLM and
SGLang adapters) agree on three things, all here so neither side imports the
other:

- :class:`WeightGroup`: the ``torch.distributed`` group to join. The trainer is
  rank 0 and hosts the group's own ``TCPStore`` at ``master_address:master_port``
  (never the trainer's training group, never the default group); an engine with
  ``n`` workers takes ranks ``rank_offset .. rank_offset + n - 1``. The shape of
  SGLang's ``init_weights_update_group`` and vLLM's RLHF worker extension.
- :class:`TensorMeta`: each tensor's name, dtype and shape, and the bucket it
  is announced in; sent to the engine over HTTP before the broadcast (SGLang's
  ``update_weights_from_distributed`` names, dtypes and shapes).
- the broadcast itself: every tensor, in the metas' order, broadcast from rank 0
  on its own in its own dtype and shape (what SGLang's
  ``update_weights_from_distributed`` and vLLM's RLHF ``update_weight`` receive).
  :func:`plan_buckets` groups consecutive tensors into buckets of a bounded
  size: an engine that loads as it receives (SGLang, vLLM) is told one bucket
  at a time, bounding what it holds unloaded; MegaFlow's own engine takes the
  whole update in one call and stages all of it.

torch is imported inside the functions that need it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

_ITEMSIZE = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1,
}  # fmt: skip


class WeightGroup(BaseModel):
    """Where and how to join the trainer's weight-update group."""

    model_config = ConfigDict(extra="forbid")

    master_address: str = Field(description="Host of the group's TCPStore (the trainer).")
    master_port: int = Field(ge=1, le=65535, description="Port of the group's TCPStore.")
    rank_offset: int = Field(ge=1, description="The member's first rank; rank 0 is the trainer.")
    world_size: int = Field(ge=2, description="Ranks in the group: the trainer and every worker.")
    group_name: str = Field(min_length=1, description="Names the group (and its store prefix).")
    backend: Literal["gloo", "nccl"] = Field("gloo", description="torch.distributed backend.")
    timeout_s: float = Field(120.0, gt=0, description="Longest wait for a join or one bucket.")


class TensorMeta(BaseModel):
    """One tensor of an update: what it is and which bucket announces it."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    dtype: str = Field(description="torch dtype without the 'torch.' prefix, e.g. 'bfloat16'.")
    shape: list[int]
    bucket: int = Field(0, ge=0, description="Index of the bucket that announces the tensor.")

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * itemsize(self.dtype)


class GroupUpdate(BaseModel):
    """One broadcast update as an engine's HTTP control endpoint receives it, before
    the buckets follow through the group."""

    model_config = ConfigDict(extra="forbid")

    metas: list[TensorMeta] = Field(min_length=1)
    version: int = Field(ge=1, description="The new weights version; above the served one.")


def itemsize(dtype: str) -> int:
    if dtype not in _ITEMSIZE:
        raise ValueError(f"dtype {dtype!r} cannot be broadcast; use one of {sorted(_ITEMSIZE)}")
    return _ITEMSIZE[dtype]


def plan_buckets(
    tensors: Iterable[tuple[str, str, Sequence[int]]], bucket_bytes: int
) -> list[TensorMeta]:
    """Metas for ``(name, dtype, shape)`` in order, consecutive tensors grouped into
    buckets of at most ``bucket_bytes`` (a larger tensor is a bucket of its own)."""
    metas: list[TensorMeta] = []
    bucket, used = 0, 0
    for name, dtype, shape in tensors:
        size = math.prod(shape) * itemsize(dtype)
        if used and used + size > bucket_bytes:
            bucket, used = bucket + 1, 0
        metas.append(TensorMeta(name=name, dtype=dtype, shape=list(shape), bucket=bucket))
        used += size
    return metas


def buckets(metas: Sequence[TensorMeta]) -> list[list[TensorMeta]]:
    """The metas of each bucket, in order."""
    out: dict[int, list[TensorMeta]] = {}
    for m in metas:
        out.setdefault(m.bucket, []).append(m)
    return [out[b] for b in sorted(out)]


def dtype_name(tensor: Any) -> str:
    return str(tensor.dtype).removeprefix("torch.")


def empty_like_meta(meta: TensorMeta, device: Any) -> Any:
    """An uninitialised tensor of ``meta``'s dtype and shape, to receive it into."""
    import torch

    return torch.empty(meta.shape, dtype=getattr(torch, meta.dtype), device=device)


@dataclass
class Member:
    """One rank's membership of a weight-update group."""

    group: WeightGroup
    rank: int
    pg: Any
    store: Any
    """The group's ``TCPStore``; rank 0 hosts it, so it lives as long as the group."""


def host_store(address: str, port: int, world_size: int, timeout_s: float) -> Any:
    """Rank 0's ``TCPStore`` for a new group, listening on ``port`` (0 picks a free
    one: its ``.port``)."""
    import torch.distributed as dist_typed

    dist: Any = dist_typed
    return dist.TCPStore(
        address,
        port,
        world_size,
        is_master=True,
        timeout=timedelta(seconds=timeout_s),
        wait_for_workers=False,
    )


def join(group: WeightGroup, rank: int, store: Any = None) -> Member:
    """Join ``group`` at ``rank`` through its ``TCPStore`` (rank 0 passes the one it
    hosts); returns once every rank joined. The default group is not touched."""
    import torch.distributed as dist_typed

    dist: Any = dist_typed  # c10d's classes are untyped bindings
    timeout = timedelta(seconds=group.timeout_s)
    if store is None:
        store = dist.TCPStore(
            group.master_address,
            group.master_port,
            group.world_size,
            is_master=False,
            timeout=timeout,
        )
    prefixed = dist.PrefixStore(group.group_name, store)
    if group.backend == "nccl":
        nccl_options = dist.ProcessGroupNCCL.Options()
        nccl_options._timeout = timeout
        nccl = dist.ProcessGroupNCCL(prefixed, rank, group.world_size, nccl_options)
        return Member(group, rank, nccl, store)
    if group.master_address in ("127.0.0.1", "localhost"):
        device = dist.ProcessGroupGloo.create_device(hostname="127.0.0.1")
    else:  # the interface GLOO_SOCKET_IFNAME names, else the hostname's
        device = dist.ProcessGroupGloo.create_default_device()
    options = dist.ProcessGroupGloo._Options()
    options._devices = [device]
    options._timeout = timeout
    pg = dist.ProcessGroupGloo(prefixed, rank, group.world_size, options)
    return Member(group, rank, pg, store)


def broadcast(member: Member, tensor: Any) -> None:
    """Broadcast ``tensor`` (contiguous) from rank 0 to every member, in place on
    receivers."""
    import torch.distributed as dist

    opts = dist.BroadcastOptions()
    opts.rootRank = 0
    opts.rootTensor = 0
    member.pg.broadcast([tensor], opts).wait()

"""New weights for a live torch model: read them, check them, copy them in place.

The ``transformers`` backend takes new weights without a restart: a state dict
handed over in-process, or a safetensors file or Hugging Face model directory
on disk (:func:`read_weights`), or under an ``s3://`` URI, downloaded and
checked against the checksums the artifact store keeps (:func:`load_weights`).
:func:`swap_weights` checks every name and shape
against the live model *before* it copies anything, so a wrong checkpoint
leaves the served weights untouched; then it copies the tensors into the
existing parameters (``load_state_dict``), so the model object, its tokenizer
and anything holding a reference to it stay as they are.

Broadcast weights (the trainer's ``broadcast`` sync) arrive through a
:class:`GroupSlot`, a replica's place in the trainer's ``torch.distributed``
group: :meth:`GroupSlot.receive` takes every tensor into a new one (the staging
copy) and only then hands them over, so a lost peer or a timeout
half-way copies nothing, and :func:`swap_weights` then checks them as it
checks a checkpoint.

Tied parameters (GPT-2's ``lm_head.weight`` is ``transformer.wte.weight``) are
saved once by ``save_pretrained``; a state dict may leave out a name whose
tensor is shared with a name it has.

torch and safetensors are imported inside the functions, so importing this
module costs nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from megaflow.core.errors import InvalidInput, ModelError
from megaflow.core.weight_group import (
    Member,
    TensorMeta,
    WeightGroup,
    broadcast,
    empty_like_meta,
    join,
)

_SHOWN = 5  # names listed in an error message


def tensor_digests(tensors: Mapping[str, Any]) -> dict[str, str]:
    """SHA-256 of each tensor's dtype, shape and bytes, by name: two processes that
    hold the same weights bit for bit give the same digests (what a trainer checks
    an engine serves after a push)."""
    import hashlib

    import torch

    out: dict[str, str] = {}
    for name, tensor in tensors.items():
        t = tensor.detach().to("cpu").contiguous()
        h = hashlib.sha256(f"{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
        out[name] = h.hexdigest()
    return out


def read_weights(source: str | Path) -> dict[str, Any]:
    """The tensors of a ``.safetensors`` file, or of every ``*.safetensors`` shard
    in a model directory (``model.safetensors`` or ``model-0000N-of-0000M``)."""
    from safetensors.torch import load_file

    path = Path(source)
    if path.is_file():
        files = [path]
    elif path.is_dir():
        files = sorted(path.glob("*.safetensors"))
        if not files:
            raise InvalidInput(f"no *.safetensors file in {path}; save the model with safetensors")
    else:
        raise InvalidInput(f"weights path {path} does not exist")
    tensors: dict[str, Any] = {}
    for f in files:
        try:
            part = load_file(f)
        except Exception as exc:  # safetensors raises its own error types
            raise InvalidInput(f"cannot read weights from {f}: {exc}") from exc
        twice = sorted(set(part) & set(tensors))
        if twice:
            raise InvalidInput(f"{f} repeats tensors of another shard: {twice[:_SHOWN]}")
        tensors.update(part)
    return tensors


async def load_weights(source: str) -> dict[str, Any]:
    """:func:`read_weights` of a local path, or of the checkpoint under an
    ``s3://bucket/prefix`` URI: every ``*.safetensors`` object below it is
    downloaded (each verified against its stored SHA-256) before any is used.
    S3 credentials and endpoint come from the standard AWS settings of the
    engine's environment (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ...)."""
    if not source.startswith("s3://"):
        return await asyncio.to_thread(read_weights, source)
    from safetensors.torch import load

    from megaflow.storage.s3_artifacts import S3ArtifactStore

    bucket, _, prefix = source.removeprefix("s3://").partition("/")
    if not bucket or not prefix.strip("/"):
        raise InvalidInput(f"weights URI {source!r} names no bucket and prefix")
    store = S3ArtifactStore(bucket, prefix=prefix.strip("/"))
    tensors: dict[str, Any] = {}
    try:
        async with store:
            keys = [k for k in await store.list() if k.endswith(".safetensors")]
            if not keys:
                raise InvalidInput(f"no *.safetensors object under {source}")
            for key in keys:
                part = await asyncio.to_thread(load, await store.get(key))
                twice = sorted(set(part) & set(tensors))
                if twice:
                    raise InvalidInput(f"{key} repeats tensors of another shard: {twice[:_SHOWN]}")
                tensors.update(part)
    except InvalidInput:
        raise
    except Exception as exc:  # storage, checksum and safetensors errors
        raise InvalidInput(f"cannot read weights from {source}: {exc}") from exc
    return tensors


def swap_weights(model: Any, weights: Mapping[str, Any]) -> None:
    """Copy ``weights`` into ``model``'s parameters and buffers, in place.

    Raises InvalidInput, with nothing copied, when a name is unknown, a shape
    differs, a value is not a tensor, or a parameter would be left without a
    value (other than one tied to a parameter that gets one).
    """
    import torch

    live = model.state_dict()
    unknown = sorted(set(weights) - set(live))
    if unknown:
        raise InvalidInput(
            f"the new weights have {len(unknown)} names the model does not: {unknown[:_SHOWN]}"
        )
    for name, value in weights.items():
        if not isinstance(value, torch.Tensor):
            raise InvalidInput(f"weight {name!r} is a {type(value).__name__}, not a tensor")
        if tuple(value.shape) != tuple(live[name].shape):
            raise InvalidInput(
                f"weight {name!r} has shape {tuple(value.shape)}; "
                f"the model has {tuple(live[name].shape)}"
            )
    given = {live[name].data_ptr() for name in weights}
    missing = sorted(n for n in set(live) - set(weights) if live[n].data_ptr() not in given)
    if missing:
        raise InvalidInput(
            f"the new weights lack {len(missing)} of the model's tensors: {missing[:_SHOWN]}"
        )
    with torch.no_grad():
        model.load_state_dict(dict(weights), strict=False)


def receive_weights(member: Member, metas: Sequence[TensorMeta], device: Any) -> dict[str, Any]:
    """Every tensor rank 0 broadcasts for ``metas``, in order, into new tensors."""
    staged: dict[str, Any] = {}
    for n, meta in enumerate(metas):
        tensor = empty_like_meta(meta, device)
        try:
            broadcast(member, tensor)
        except Exception as exc:  # gloo and NCCL raise their own error types
            raise ModelError(
                f"tensor {n + 1} of {len(metas)} ({meta.name}) of the broadcast did not "
                f"arrive: {exc}"
            ) from exc
        staged[meta.name] = tensor
    return staged


class GroupSlot:
    """One replica's place in the trainer's weight-update group (one rank)."""

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.member: Member | None = None

    async def join(self, group: WeightGroup, device: Any) -> None:
        """Join ``group`` at ``group.rank_offset``, leaving any group joined before."""
        if group.backend == "nccl" and getattr(device, "type", "cpu") != "cuda":
            raise InvalidInput(f"{self.owner} runs on {device}; NCCL needs a GPU, use gloo")
        self.member = None
        try:
            self.member = await asyncio.to_thread(join, group, group.rank_offset)
        except Exception as exc:  # the store or a peer did not answer in time
            raise ModelError(
                f"{self.owner} could not join weight group {group.group_name!r} at "
                f"{group.master_address}:{group.master_port}: {exc}"
            ) from exc

    async def receive(self, metas: Sequence[TensorMeta], device: Any) -> dict[str, Any]:
        """The staged tensors of one update; a failed receive leaves the group (the
        trainer forms a new one), since the ranks are out of step."""
        member = self.member
        if member is None:
            raise InvalidInput(f"{self.owner} is in no weight-update group; join one first")
        try:
            return await asyncio.to_thread(receive_weights, member, metas, device)
        except Exception:
            self.member = None
            raise

    def leave(self) -> None:
        self.member = None

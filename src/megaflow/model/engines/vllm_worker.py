"""MegaFlow's vLLM worker extension: each vLLM worker joins the trainer's weight group.

Start vLLM with ``--worker-extension-cls
megaflow.model.engines.vllm_worker.WeightReceiver`` (and
``VLLM_SERVER_DEV_MODE=1`` for ``/collective_rpc``): vLLM mixes this class into
every worker, so :class:`~megaflow.model.engines.vllm.VLLMEngine` can call its
methods on all of them through ``/collective_rpc``, the pattern of vLLM's RLHF
example (``examples/offline_inference/rlhf_utils.py``). MegaFlow must be
installed where vLLM runs.

The group and the broadcast are :mod:`megaflow.core.weight_group`'s: the
trainer's rank 0 hosts the group's ``TCPStore``, each worker joins at
``rank_offset`` + its rank inside the engine, and every tensor arrives on its
own, in the order of the metas, in its dtype and shape. A worker loads a
bucket into the model (``model.load_weights``, which maps Hugging Face names
onto vLLM's fused and sharded parameters) once all of its tensors arrived.

vLLM is imported only inside the methods, in the worker's process.
"""

from __future__ import annotations

from typing import Any

from megaflow.core.weight_group import (
    Member,
    TensorMeta,
    WeightGroup,
    broadcast,
    empty_like_meta,
    join,
)


class WeightReceiver:
    """Methods vLLM adds to its worker; called through ``/collective_rpc``."""

    model_runner: Any
    """vLLM's model runner (the worker's)."""
    device: Any
    """The worker's device (vLLM's)."""
    _weight_member: Member | None = None

    def _worker_rank(self) -> int:
        """This worker's rank inside its engine (0 .. tensor x pipeline parallel - 1)."""
        from vllm.distributed.parallel_state import get_world_group  # type: ignore[import-not-found]

        return int(get_world_group().rank)

    def init_weight_update_group(
        self,
        master_address: str,
        master_port: int,
        rank_offset: int,
        world_size: int,
        group_name: str = "megaflow-weights",
        backend: str = "nccl",
        timeout_s: float = 120.0,
    ) -> int:
        """Join the trainer's group; returns this worker's rank in it."""
        group = WeightGroup(
            master_address=master_address,
            master_port=master_port,
            rank_offset=rank_offset,
            world_size=world_size,
            group_name=group_name,
            backend="nccl" if backend == "nccl" else "gloo",
            timeout_s=timeout_s,
        )
        rank = rank_offset + self._worker_rank()
        self._weight_member = join(group, rank)
        return rank

    def _receive(self, meta: TensorMeta) -> Any:
        member = self._weight_member
        if member is None:
            raise RuntimeError("no weight-update group: call init_weight_update_group first")
        device = self.device if member.group.backend == "nccl" else "cpu"
        tensor = empty_like_meta(meta, device)
        broadcast(member, tensor)
        return tensor

    def update_weights(self, metas: list[dict[str, Any]]) -> int:
        """Receive one bucket (tensor by tensor, in order), then load it; its size."""
        received = []
        for raw in metas:
            meta = TensorMeta.model_validate(raw)
            received.append((meta.name, self._receive(meta)))
        self.model_runner.model.load_weights(weights=received)
        return len(received)

    def update_weight(self, name: str, dtype_name: str, shape: list[int]) -> None:
        """Receive and load one tensor (the call of vLLM's RLHF example)."""
        meta = TensorMeta(name=name, dtype=dtype_name, shape=list(shape))
        self.model_runner.model.load_weights(weights=[(name, self._receive(meta))])

    def close_weight_update_group(self) -> None:
        """Leave the group (the trainer's rank 0 hosts its store)."""
        self._weight_member = None

"""``train.weight_sync``: how new weights reach the engines, one config per sync.

Each config builds its sync (``build``), importing its module only then::

    weight_sync: {type: in_process}              # the default
    weight_sync: {type: disk, root: /shared/weights, keep: 2}
    weight_sync: {type: broadcast, backend: nccl, master_address: 10.0.0.5}
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from megaflow.core.errors import ConfigError

if TYPE_CHECKING:
    from megaflow.storage.abstract import ArtifactStore
    from megaflow.train.weight_sync.abstract import Engines, WeightSync


class _Cfg(BaseModel):
    """Each sync's ``build(engines, base_model=, run_id=, artifacts=)`` returns it;
    ``artifacts`` is the run's artifact store, for the syncs that write there."""

    model_config = ConfigDict(extra="forbid")

    carries: ClassVar[str]
    """What reaches the engines: ``tensors`` or a ``path``; the rollout model must take it."""


class InProcessSyncConfig(_Cfg):
    """The rollout backends run in the trainer's process and take the state dict
    as tensors. Needs an in-process model (``model.type: transformers``)."""

    type: Literal["in_process"] = Field("in_process", description="This sync's tag.")
    carries: ClassVar[str] = "tensors"

    def build(
        self,
        engines: Engines,
        *,
        base_model: Path,
        run_id: str,
        artifacts: ArtifactStore | None = None,
    ) -> WeightSync:
        from megaflow.train.weight_sync.in_process import InProcessWeightSync

        return InProcessWeightSync(engines)


class DiskSyncConfig(_Cfg):
    """Each update is written as a safetensors checkpoint in Hugging Face layout
    under ``ROOT/<run id>/v<version>/`` (or in the run's artifact store, ``store:
    artifacts``); every engine loads it by path or URI."""

    type: Literal["disk"] = Field("disk", description="This sync's tag.")
    carries: ClassVar[str] = "path"
    root: str = Field(
        ".megaflow/weights",
        description="Directory the checkpoints go to; the engines must read it under the "
        "same path (a shared filesystem when they run on other machines).",
    )
    keep: int = Field(
        2, ge=1, le=1000, description="Checkpoints kept; older ones are deleted after an update."
    )
    timeout_s: float = Field(
        600, gt=0, description="Longest wait for one engine to load a checkpoint."
    )
    max_shard_mb: int = Field(
        2048, ge=1, description="Largest safetensors file; a bigger model is sharded."
    )
    store: Literal["root", "artifacts"] = Field(
        "root",
        description="Where the checkpoints go: 'root' (the directory above, read by path) "
        "or 'artifacts' (the run's artifact store under weights/<run id>/v<N>/: a local "
        "store's directory, or an s3:// URI the engines download from).",
    )

    def build(
        self,
        engines: Engines,
        *,
        base_model: Path,
        run_id: str,
        artifacts: ArtifactStore | None = None,
    ) -> WeightSync:
        from megaflow.train.weight_sync.disk import DiskWeightSync

        if self.store == "artifacts" and artifacts is None:
            raise ConfigError(
                "train.weight_sync.store is 'artifacts' but the run has no artifact store",
                [("train.weight_sync.store", "no artifact store to write to")],
            )
        return DiskWeightSync(
            engines,
            base_model=base_model,
            root=Path(self.root) / run_id,
            keep=self.keep,
            timeout_s=self.timeout_s,
            max_shard_mb=self.max_shard_mb,
            store=artifacts if self.store == "artifacts" else None,
            run_id=run_id,
        )


class BroadcastSyncConfig(_Cfg):
    """The trainer's rank 0 and every engine worker form a ``torch.distributed``
    group of their own; each update is broadcast tensor by tensor, announced to the
    engines over their HTTP control endpoint first. No checkpoint touches disk."""

    type: Literal["broadcast"] = Field("broadcast", description="This sync's tag.")
    carries: ClassVar[str] = "broadcast"
    backend: Literal["gloo", "nccl"] = Field(
        "gloo", description="torch.distributed backend: gloo on CPUs, nccl between GPUs."
    )
    master_address: str = Field(
        "127.0.0.1",
        min_length=1,
        description="The trainer's address as the engines reach it; the group's TCPStore "
        "listens there.",
    )
    master_port: int = Field(
        0, ge=0, le=65535, description="Port of the group's TCPStore; 0 picks a free one."
    )
    bucket_mb: float = Field(
        256, gt=0, description="Tensors announced together to an engine that loads by bucket."
    )
    timeout_s: float = Field(
        120, gt=0, description="Longest wait for the group to form or for one tensor to arrive."
    )
    group_name: str = Field(
        "megaflow-weights", min_length=1, description="Names the group (a suffix counts re-forms)."
    )

    def build(
        self,
        engines: Engines,
        *,
        base_model: Path,
        run_id: str,
        artifacts: ArtifactStore | None = None,
    ) -> WeightSync:
        from megaflow.train.weight_sync.broadcast import BroadcastWeightSync

        return BroadcastWeightSync(
            engines,
            backend=self.backend,
            master_address=self.master_address,
            master_port=self.master_port,
            bucket_mb=self.bucket_mb,
            timeout_s=self.timeout_s,
            group_name=self.group_name,
        )


WeightSyncConfig = Annotated[
    InProcessSyncConfig | DiskSyncConfig | BroadcastSyncConfig, Field(discriminator="type")
]

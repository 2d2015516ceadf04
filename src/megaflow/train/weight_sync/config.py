"""``train.weight_sync``: how new weights reach the engines, one config per sync.

Each config builds its sync (``build``), importing its module only then::

    weight_sync: {type: in_process}              # the default
    weight_sync: {type: disk, root: /shared/weights, keep: 2}
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from megaflow.train.weight_sync.abstract import Engines, WeightSync


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid")

    carries: ClassVar[str]
    """What reaches the engines: ``tensors`` or a ``path``; the rollout model must take it."""


class InProcessSyncConfig(_Cfg):
    """The rollout backends run in the trainer's process and take the state dict
    as tensors. Needs an in-process model (``model.type: transformers``)."""

    type: Literal["in_process"] = Field("in_process", description="This sync's tag.")
    carries: ClassVar[str] = "tensors"

    def build(self, engines: Engines, *, base_model: Path, run_id: str) -> WeightSync:
        from megaflow.train.weight_sync.in_process import InProcessWeightSync

        return InProcessWeightSync(engines)


class DiskSyncConfig(_Cfg):
    """Each update is written as a safetensors checkpoint in Hugging Face layout
    under ``ROOT/<run id>/v<version>/``; every engine loads it by path."""

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

    def build(self, engines: Engines, *, base_model: Path, run_id: str) -> WeightSync:
        from megaflow.train.weight_sync.disk import DiskWeightSync

        return DiskWeightSync(
            engines,
            base_model=base_model,
            root=Path(self.root) / run_id,
            keep=self.keep,
            timeout_s=self.timeout_s,
            max_shard_mb=self.max_shard_mb,
        )


WeightSyncConfig = Annotated[InProcessSyncConfig | DiskSyncConfig, Field(discriminator="type")]

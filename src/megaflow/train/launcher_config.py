"""Where the trainer's ranks run: the ``train.launcher`` section (tagged by ``type``).

``local`` (the default) starts them as processes of this machine, or joins
them under ``torchrun`` (:mod:`megaflow.train.launch`). ``ray`` places every
rank as an actor of a Ray cluster, one bundle of a placement group each
(:mod:`megaflow.train.ray_ranks`), so the nodes that run rollouts
(``fleet: {type: ray}``) and the nodes that train can be one cluster.
``docs/ray.md`` describes it.

Like every config section this imports neither torch nor Ray.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LocalLauncherConfig(_Cfg):
    """Ranks as processes of this machine (rank 0 the caller's), or under torchrun."""

    type: Literal["local"] = "local"


class RayLauncherConfig(_Cfg):
    """Every rank a Ray actor in one placement group; rank 0's actor hosts the rendezvous."""

    type: Literal["ray"] = "ray"
    address: str | None = Field(
        None,
        description="The Ray cluster: 'auto', 'host:6379' or 'ray://host:10001'; None: the "
        "cluster this process is already connected to (a run's `fleet: {type: ray}`), else "
        "'auto'.",
    )
    cpus_per_rank: float = Field(1.0, gt=0, description="CPUs each rank's bundle reserves.")
    gpus_per_rank: float = Field(
        0.0, ge=0, description="GPUs each rank's bundle reserves; > 0 makes backend 'auto' NCCL."
    )
    resources: dict[str, float] = Field(
        default_factory=dict,
        description="Custom resources each rank's bundle asks for too, e.g. {'trainer': 1} to "
        "keep the ranks on nodes started with that resource.",
    )
    placement: Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"] = Field(
        "PACK",
        description="Ray's placement-group strategy: PACK ranks on few nodes, SPREAD them "
        "over many; STRICT_ forms refuse to place otherwise.",
    )
    start_timeout_s: float = Field(
        120.0,
        gt=0,
        description="Longest wait for the cluster to place every rank's bundle and start its "
        "actor.",
    )


LauncherConfig = Annotated[LocalLauncherConfig | RayLauncherConfig, Field(discriminator="type")]

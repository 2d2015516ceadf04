"""Fleet configs: which machines the scheduler places tasks on (tagged by ``type``).

``local`` is this machine as one instance (the embedded default). ``ray`` is
a Ray cluster: one MegaFlow node agent per Ray node that offers sandbox
slots, built by :mod:`megaflow.app.ray_fleet` (the app wires it, since the
node agents serve the Environment Service over gRPC).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LocalFleetConfig(_Cfg):
    """This machine, as one instance holding ``scheduler.max_concurrency`` tasks."""

    type: Literal["local"] = "local"


class RayFleetConfig(_Cfg):
    """A Ray cluster: a node agent (sandbox runtime + Environment Service) per node."""

    type: Literal["ray"] = "ray"
    address: str = Field(
        "auto", description="Ray cluster address: 'auto', 'host:6379' or 'ray://host:10001'."
    )
    slot_resource: str = Field(
        "megaflow_slots",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="Custom Ray resource counting a node's sandbox slots; nodes without it "
        "(such as a head started without it) get no node agent.",
    )
    region: str = Field("default", description="Region the node agents' instances are in.")
    poll_s: float = Field(0.5, gt=0, le=60, description="How often node agents are pinged.")
    lost_after_s: float = Field(
        3.0, gt=0, description="A node agent unanswered for this long is an InstanceLost."
    )
    agent_start_s: float = Field(60.0, gt=0, description="Longest wait for a node agent.")
    autoscale: bool = Field(
        False, description="Ask Ray's autoscaler for nodes (request_resources) from queue depth."
    )
    slots_per_node: int = Field(
        4, ge=1, description="Sandbox slots of one node the autoscaler adds (its bundle)."
    )
    warm_share: float = Field(
        0.2, ge=0, lt=1, description="Share of the requested nodes kept as warm spares."
    )
    min_nodes: int = Field(0, ge=0, description="Nodes always requested.")
    max_nodes: int = Field(1000, ge=1, description="Most nodes ever requested.")


FleetConfig = Annotated[LocalFleetConfig | RayFleetConfig, Field(discriminator="type")]

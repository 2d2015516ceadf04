"""Scheduler configs: the policy (tagged by ``type``), queues and limits."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FifoPolicyConfig(_Cfg):
    type: Literal["fifo"] = "fifo"


class PriorityPolicyConfig(_Cfg):
    type: Literal["priority"] = "priority"
    aging_per_s: float = Field(0.1, ge=0, description="Priority gained per second of waiting.")


class FairPolicyConfig(_Cfg):
    type: Literal["fair"] = "fair"
    key: Literal["run", "tenant"] = "run"
    weights: dict[str, float] = Field(
        default_factory=dict, description="Share per key; 1 if absent."
    )


class CustomPolicyConfig(_Cfg):
    type: Literal["custom"] = "custom"
    path: str = Field(description="Dotted path to a SchedulingPolicy subclass.")
    options: dict[str, object] = Field(default_factory=dict)


PolicyConfig = Annotated[
    FifoPolicyConfig | PriorityPolicyConfig | FairPolicyConfig | CustomPolicyConfig,
    Field(discriminator="type"),
]


class SchedulerConfig(_Cfg):
    policy: PolicyConfig = Field(default_factory=FifoPolicyConfig)
    queues: Literal["shared", "per_type"] = "shared"
    max_concurrency: int = Field(8, ge=1, le=1_000_000, description="Tasks running at once.")
    preemption: bool = False

"""``model.launch``: engines of the train policy that `megaflow train` starts itself.

An ``openai`` model with ``weight_sync: megaflow`` either points at engines
already running (``base_url`` and ``replicas``) or, with ``launch``, has the
run start ``replicas`` engine processes (``megaflow serve model``, the
``transformers`` backend) on free loopback ports, with a bearer token the run
generates and passes to them in their environment (never written to disk),
and stop them when it ends. :mod:`megaflow.app.training.engines` does it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class EngineLaunchConfig(BaseModel):
    """Engine processes the run starts, health-checks, points its client at and stops."""

    model_config = ConfigDict(extra="forbid")

    replicas: int = Field(2, ge=1, le=16, description="Engine processes to start.")
    model: str | None = Field(
        None,
        description="Model directory the engines serve as version 0; train.policy when "
        "None (the trainer and the engines must start from the same weights).",
    )
    max_new_tokens: int = Field(256, ge=1, description="Each engine's default generation length.")
    update_in_flight: Literal["finish", "resume"] = Field(
        "finish",
        description="What an engine does with a generation in flight when new weights "
        "arrive (the transformers model's field of that name).",
    )
    start_timeout_s: float = Field(
        180.0, gt=0, description="Longest wait for every engine to answer its health check."
    )
    stop_grace_s: float = Field(
        10.0,
        gt=0,
        description="Seconds between SIGTERM and SIGKILL to each engine's process group "
        "when the run ends.",
    )
    dir: str | None = Field(
        None,
        description="Where each engine's config and log go; <train.out_dir>/<run id>/engines "
        "when None.",
    )

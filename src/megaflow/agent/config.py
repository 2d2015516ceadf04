"""Agent configs, tagged by ``type``."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BuiltinAgentConfig(_Cfg):
    """The built-in tool-calling agent (bash, read/edit/write file, submit)."""

    type: Literal["builtin"] = "builtin"
    max_steps: int = Field(30, ge=1, le=10_000)
    max_tokens: int = Field(200_000, ge=1)
    max_seconds: float = Field(600, gt=0)


class MiniSweAgentConfig(_Cfg):
    """The real mini-swe-agent package, driving a MegaFlow sandbox."""

    type: Literal["mini-swe-agent"] = "mini-swe-agent"
    step_limit: int = Field(30, ge=1, le=10_000)


AgentConfig = Annotated[BuiltinAgentConfig | MiniSweAgentConfig, Field(discriminator="type")]

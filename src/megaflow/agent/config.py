"""Agent configs, tagged by ``type``; each builds its agent (``build()``), importing the
adapter only then (mini-swe-agent is an extra)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from megaflow.agent.abstract import Agent


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BuiltinAgentConfig(_Cfg):
    """The built-in tool-calling agent (bash, read/edit/write file, submit)."""

    type: Literal["builtin"] = "builtin"
    max_steps: int = Field(30, ge=1, le=10_000, description="Most model calls in one episode.")
    max_tokens: int = Field(
        200_000, ge=1, description="Most prompt plus completion tokens in one episode."
    )
    max_seconds: float = Field(600, gt=0, description="Longest episode, wall clock.")
    command_timeout_s: float = Field(120, gt=0, description="Longest single bash command.")
    max_observation_chars: int = Field(
        10_000, ge=200, description="Longer tool outputs keep their head and tail only."
    )
    max_format_errors: int = Field(
        5, ge=1, description="Malformed answers in a row before the agent gives up (AgentError)."
    )
    workdir: str = Field("/workspace", description="The repository directory in the sandbox.")
    temperature: float | None = Field(None, ge=0, le=2, description="Sampling temperature.")
    completion_tokens: int | None = Field(
        None, ge=1, description="max_tokens of each model call; None leaves it to the backend."
    )
    system_prompt: str | None = Field(None, description="Replaces the built-in system prompt.")

    def build(self) -> Agent:
        from megaflow.agent.builtin import BuiltinAgent

        return BuiltinAgent(self)


class MiniSweAgentConfig(_Cfg):
    """The real mini-swe-agent package, driving a MegaFlow sandbox."""

    type: Literal["mini-swe-agent"] = "mini-swe-agent"
    step_limit: int = Field(30, ge=1, le=10_000, description="Most model calls in one episode.")
    wall_time_limit_s: int = Field(600, ge=0, description="Longest episode; 0 means no limit.")
    command_timeout_s: float = Field(120, gt=0, description="Longest single bash command.")
    workdir: str = Field("/workspace", description="The repository directory in the sandbox.")
    templates: str = Field(
        "benchmarks/swebench.yaml",
        description="mini-swe-agent config (in its package) whose prompts and templates are used.",
    )
    model_class: str | None = Field(
        None,
        description="Dotted path of a mini-swe-agent model class to use instead of the "
        "MegaFlow model client (e.g. its deterministic test model).",
    )
    model_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Keyword arguments of model_class."
    )

    def build(self) -> Agent:
        from megaflow.agent.miniswe import MiniSweAgent

        return MiniSweAgent(self)


class OpenHandsAgentConfig(_Cfg):
    """The OpenHands software agent (openhands-sdk, in a Python 3.12 venv of its own)."""

    type: Literal["openhands"] = "openhands"
    max_iterations: int = Field(
        30, ge=1, le=10_000, description="Most agent steps (model calls) in one episode."
    )
    wall_time_limit_s: float = Field(
        1800, gt=0, description="Longest episode; the OpenHands process is killed then."
    )
    command_timeout_s: float = Field(120, gt=0, description="Longest single terminal command.")
    workdir: str = Field("/workspace", description="The repository directory in the sandbox.")
    model: str = Field("default", description="Model name sent to the gateway.")
    temperature: float | None = Field(None, ge=0, le=2, description="Sampling temperature.")
    completion_tokens: int | None = Field(
        None, ge=1, description="max_tokens of each model call; None leaves it to the backend."
    )
    python: str | None = Field(
        None,
        description="Interpreter of the OpenHands venv; None: <megaflow venv>/openhands/bin/python "
        "(scripts/install-openhands.sh).",
    )

    def build(self) -> Agent:
        from megaflow.agent.openhands import OpenHandsAgent

        return OpenHandsAgent(self)


AgentConfig = Annotated[
    BuiltinAgentConfig | MiniSweAgentConfig | OpenHandsAgentConfig, Field(discriminator="type")
]

"""Build an agent from its config; adapters import lazily (mini-swe-agent is an extra)."""

from __future__ import annotations

from megaflow.agent.abstract import Agent
from megaflow.agent.config import AgentConfig, BuiltinAgentConfig, MiniSweAgentConfig


def make_agent(cfg: AgentConfig) -> Agent:
    if isinstance(cfg, BuiltinAgentConfig):
        from megaflow.agent.builtin import BuiltinAgent

        return BuiltinAgent(cfg)
    if isinstance(cfg, MiniSweAgentConfig):
        from megaflow.agent.miniswe import MiniSweAgent

        return MiniSweAgent(cfg)
    raise TypeError(f"unknown agent config {type(cfg).__name__}")

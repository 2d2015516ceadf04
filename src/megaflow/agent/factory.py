"""Build an agent from its config (the config's ``build``); adapters import lazily."""

from __future__ import annotations

from megaflow.agent.abstract import Agent
from megaflow.agent.config import AgentConfig


def make_agent(cfg: AgentConfig) -> Agent:
    return cfg.build()

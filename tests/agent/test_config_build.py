"""Every agent config builds its own agent; the factory has no type switch."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest

from megaflow.agent import config, factory
from megaflow.agent.abstract import Agent

MEMBERS = typing.get_args(typing.get_args(config.AgentConfig)[0])


@pytest.mark.parametrize("cls", MEMBERS, ids=lambda c: c.__name__)
def test_each_member_builds_through_its_own_method(cls: type) -> None:
    assert "build" in vars(cls)
    if cls is config.MiniSweAgentConfig:
        pytest.importorskip("minisweagent")
    agent = cls().build()
    assert isinstance(agent, Agent)
    assert isinstance(factory.make_agent(cls()), type(agent))


def test_factory_has_no_type_switch() -> None:
    assert "isinstance" not in Path(factory.__file__).read_text()

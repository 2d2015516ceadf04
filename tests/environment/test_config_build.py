"""Every runtime config builds its own runtime; the factory has no type switch."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from megaflow.environment import config, factory
from megaflow.environment.abstract import Runtime
from megaflow.monitoring.environment import EnvironmentMetrics

MEMBERS = typing.get_args(typing.get_args(config.RuntimeConfig)[0])


@pytest.mark.parametrize("cls", MEMBERS, ids=lambda c: c.__name__)
def test_each_member_builds_through_its_own_method(cls: type) -> None:
    assert "build" in vars(cls)
    runtime = cls().build(metrics=EnvironmentMetrics(CollectorRegistry()))  # starts nothing yet
    assert isinstance(runtime, Runtime)
    assert isinstance(factory.make_runtime(cls()), type(runtime))


def test_factory_has_no_type_switch() -> None:
    assert "isinstance" not in Path(factory.__file__).read_text()

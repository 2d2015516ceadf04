"""Build a runtime from its config (the config's ``build``); backends import lazily."""

from __future__ import annotations

from megaflow.environment.abstract import Runtime
from megaflow.environment.config import RuntimeConfig
from megaflow.monitoring.environment import EnvironmentMetrics


def make_runtime(cfg: RuntimeConfig, metrics: EnvironmentMetrics | None = None) -> Runtime:
    """The runtime ``cfg`` names; call ``await runtime.start()`` before use."""
    return cfg.build(metrics=metrics)

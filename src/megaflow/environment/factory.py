"""Build a runtime from its config. Backends are imported only when chosen."""

from __future__ import annotations

from megaflow.environment.abstract import Runtime
from megaflow.environment.config import (
    ContainerRuntimeConfig,
    DummyRuntimeConfig,
    LocalRuntimeConfig,
)
from megaflow.monitoring.environment import EnvironmentMetrics


def make_runtime(
    cfg: LocalRuntimeConfig | ContainerRuntimeConfig | DummyRuntimeConfig,
    metrics: EnvironmentMetrics | None = None,
) -> Runtime:
    """The runtime ``cfg`` names; call ``await runtime.start()`` before use."""
    if isinstance(cfg, LocalRuntimeConfig):
        from megaflow.environment.local import LocalRuntime

        return LocalRuntime(cfg, metrics=metrics)
    if isinstance(cfg, ContainerRuntimeConfig):
        from megaflow.environment.container import ContainerRuntime

        return ContainerRuntime(cfg, metrics=metrics)
    if isinstance(cfg, DummyRuntimeConfig):
        from megaflow.environment.dummy import DummyRuntime

        return DummyRuntime()
    raise NotImplementedError(f"the {cfg.type!r} runtime is not available in this build")

"""The ``container`` runtime: sandboxes are containers of a Docker-compatible engine.

The runtime and sandbox classes (which need the Docker SDK, the ``container``
extra) are imported on first use, so the SDK-free parts (``scripts``, ``tar``)
serve other backends without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from megaflow.environment.container.runtime import ContainerRuntime
    from megaflow.environment.container.sandbox import ContainerSandbox

__all__ = ["ContainerRuntime", "ContainerSandbox"]


def __getattr__(name: str) -> Any:
    if name == "ContainerRuntime":
        from megaflow.environment.container.runtime import ContainerRuntime

        return ContainerRuntime
    if name == "ContainerSandbox":
        from megaflow.environment.container.sandbox import ContainerSandbox

        return ContainerSandbox
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

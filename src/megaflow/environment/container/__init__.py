"""The ``container`` runtime: sandboxes are containers of a Docker-compatible engine."""

from megaflow.environment.container.runtime import ContainerRuntime
from megaflow.environment.container.sandbox import ContainerSandbox

__all__ = ["ContainerRuntime", "ContainerSandbox"]

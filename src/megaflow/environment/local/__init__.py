"""The ``local`` runtime: bubblewrap sandboxes with cgroup limits on this host."""

from megaflow.environment.local.runtime import LocalRuntime
from megaflow.environment.local.sandbox import LocalSandbox

__all__ = ["LocalRuntime", "LocalSandbox"]

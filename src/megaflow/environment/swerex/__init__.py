"""MegaFlow sandboxes as SWE-ReX runtimes, so SWE-agent and other SWE-ReX users
run unchanged on them: a runtime over ``Sandbox.exec``, a deployment that takes
its sandbox from a MegaFlow runtime or pool, and SWE-ReX's HTTP protocol
served for a sandbox (``megaflow sandbox swerex``). Needs the ``agents`` extra.
"""

from megaflow.environment.swerex.deployment import SandboxDeployment
from megaflow.environment.swerex.runtime import SandboxRuntime

__all__ = ["SandboxDeployment", "SandboxRuntime"]

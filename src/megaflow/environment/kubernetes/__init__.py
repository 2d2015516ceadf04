"""The ``kubernetes`` runtime: sandboxes are pods, made through the official Python client.

The runtime and sandbox classes (which need the client, the ``kubernetes``
extra) are imported on first use, so what a node needs without the client,
the sandboxes' seccomp profile files (``profiles``), comes without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from megaflow.environment.kubernetes.runtime import KubernetesRuntime
    from megaflow.environment.kubernetes.sandbox import KubernetesSandbox

__all__ = ["KubernetesRuntime", "KubernetesSandbox"]


def __getattr__(name: str) -> Any:
    if name == "KubernetesRuntime":
        from megaflow.environment.kubernetes.runtime import KubernetesRuntime

        return KubernetesRuntime
    if name == "KubernetesSandbox":
        from megaflow.environment.kubernetes.sandbox import KubernetesSandbox

        return KubernetesSandbox
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

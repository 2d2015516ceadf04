"""The ``kubernetes`` runtime: sandboxes are pods, made through the official Python client."""

from megaflow.environment.kubernetes.runtime import KubernetesRuntime
from megaflow.environment.kubernetes.sandbox import KubernetesSandbox

__all__ = ["KubernetesRuntime", "KubernetesSandbox"]

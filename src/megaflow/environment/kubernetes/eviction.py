"""What an evicted sandbox pod means for the command that was running in it.

A kubelet evicts a pod whose container writes past its ``ephemeral-storage``
limit (the runtime sets it to ``disk_mb``; with ``workspace: image`` it is the
only disk limit, see :mod:`~megaflow.environment.kubernetes.security`): the
containers are killed and the pod is left ``Failed`` with reason ``Evicted``
and a message naming the limit. The exec in flight then ends killed, or
cannot open at all. That is the sandbox's own doing, like a command that
fills its sized volume: :class:`~megaflow.core.errors.AgentError`, final,
with the kubelet's message and the limit, never retried as infrastructure
(a retry would write past it again). A pod evicted for the node's sake
(the node low on disk or memory) is an infrastructure failure
(:class:`~megaflow.core.errors.SandboxError`, retried elsewhere).
"""

from __future__ import annotations

from kubernetes.client.exceptions import ApiException

from megaflow.core.errors import AgentError, MegaFlowError, SandboxError
from megaflow.environment.kubernetes.api import KubeApi

# Parts of the kubelet's eviction messages for a pod over its own limits
# (eviction manager): a container's limit, the pod's total, an emptyDir's sizeLimit.
OWN_LIMIT = (
    "exceeded its local ephemeral storage limit",
    "ephemeral local storage usage exceeds the total limit",
    "exceeds the limit",
)


async def eviction(kube: KubeApi, namespace: str, pod: str) -> str | None:
    """The kubelet's message when ``pod`` was evicted; None when it was not (or
    cannot be read: the caller's own error stands then)."""
    try:
        status = (await kube.call("read_namespaced_pod", pod, namespace)).status
    except ApiException:
        return None
    if status is None or status.reason != "Evicted":
        return None
    return str(status.message or "evicted").strip()


def eviction_error(sandbox_id: str, pod: str, message: str, disk_mb: int | None) -> MegaFlowError:
    """The error of a command whose sandbox's pod was evicted with ``message``."""
    if any(part in message for part in OWN_LIMIT):
        limit = f"disk_mb: {disk_mb}, " if disk_mb is not None else ""
        return AgentError(
            f"sandbox {sandbox_id}: its pod {pod} was evicted for writing past its disk "
            f"limit ({limit}the pod's ephemeral-storage limit): {message}"
        )
    return SandboxError(f"sandbox {sandbox_id}: its pod {pod} was evicted by its node: {message}")


def killed(code: int | None, timed_out: bool) -> bool:
    """Whether an exec's end may be its pod's eviction: no exit status, or
    killed by a signal, and not by the runtime's own timeout."""
    return not timed_out and (code is None or code >= 128)

"""A sandbox pod that writes past its ephemeral-storage limit is evicted, and the
runtime says so.

With ``workspace: image`` the pod's root stays writable and ``disk_mb`` is its
``ephemeral-storage`` limit alone, which a kubelet enforces by evicting the
pod. The Podman stand-in evicts as a kubelet does (pod ``Failed``, reason
``Evicted``, the kubelet's message naming the limit); the runtime then fails
the command with an ``AgentError`` naming the limit: the sandbox's own doing,
not an infrastructure failure to retry, and not a hang.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from megaflow.core.errors import AgentError, InfraError
from megaflow.core.tasks import Outcome, classify
from megaflow.environment.abstract import EnvironmentSpec, SandboxResources
from megaflow.environment.config import KubernetesRuntimeConfig
from megaflow.environment.kubernetes import KubernetesRuntime
from megaflow.environment.kubernetes.eviction import eviction_error
from tests.environment.kubernetes.podman_kubelet import ExecServer, PodmanCoreV1Api
from tests.fixtures.podman import PodmanService

FILL = "dd if=/dev/zero of=/tmp/fill bs=1M count=$0 2>/dev/null; sync; echo wrote; sleep $1"


@pytest.fixture
def exec_server(podman_service: PodmanService) -> Iterator[ExecServer]:
    server = ExecServer(podman_service)
    yield server
    server.close()


@pytest.fixture
async def rt(
    podman_service: PodmanService, exec_server: ExecServer, tmp_path: Path
) -> AsyncIterator[tuple[KubernetesRuntime, PodmanCoreV1Api]]:
    api = PodmanCoreV1Api(podman_service, exec_server, tmp_path)
    config = KubernetesRuntimeConfig(
        host_image=podman_service.image, image_pull_policy="Never", reap_interval_s=None,
        start_timeout_s=60, workspace="image", run_as_user=None,
    )  # fmt: skip
    runtime = KubernetesRuntime(config, api=api)
    await runtime.start()
    yield runtime, api
    await runtime.stop()
    assert api.pods == {}
    assert podman_service.podman("pod", "ps", "-q").stdout.split() == []


@pytest.mark.container
async def test_a_pod_over_its_ephemeral_storage_limit_is_evicted_and_the_command_fails(
    rt: tuple[KubernetesRuntime, PodmanCoreV1Api],
) -> None:
    runtime, api = rt
    spec = EnvironmentSpec(workdir="/tmp", resources=SandboxResources(disk_mb=16))
    async with await runtime.create(spec) as sb:
        pod = sb.info.id
        under = await sb.exec(["sh", "-c", FILL, "4", "2"], timeout=60)  # under the limit
        assert (under.exit_code, under.stdout) == (0, "wrote\n")
        assert api.read_namespaced_pod(pod, runtime.config.namespace).status.phase == "Running"
        with pytest.raises(AgentError) as err:  # over it: killed within housekeeping
            await asyncio.wait_for(sb.exec(["sh", "-c", FILL, "40", "300"], timeout=None), 60)
        message = str(err.value)
        assert "evicted for writing past its disk limit (disk_mb: 16" in message
        assert 'exceeded its local ephemeral storage limit "16Mi"' in message
        assert not isinstance(err.value, InfraError)
        assert classify(err.value) is Outcome.AGENT  # final, not retried
        status = api.read_namespaced_pod(pod, runtime.config.namespace).status
        assert (status.phase, status.reason) == ("Failed", "Evicted")
        assert status.container_statuses[0].state.terminated.exit_code == 137
        with pytest.raises(AgentError, match="16Mi"):  # the next command, too
            await asyncio.wait_for(sb.exec("true", timeout=30), 60)


def test_an_eviction_for_the_nodes_sake_is_infrastructure() -> None:
    node = "The node was low on resource: ephemeral-storage. Threshold quantity: 1Gi."
    err = eviction_error("s", "p", node, 16)
    assert isinstance(err, InfraError)
    assert node in str(err)
    own = eviction_error("s", "p", "Pod ephemeral local storage usage exceeds the total "
                         "limit of containers 16Mi. ", 16)  # fmt: skip
    assert isinstance(own, AgentError)

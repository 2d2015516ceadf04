"""A sandbox pod's security fields, run by the Podman kubelet stand-in as a node would.

First the stand-in itself: each field becomes the Podman option a kubelet's
container runtime applies, and a field it does not know is refused, not
dropped. Then on Podman: a node whose seccomp root lacks the profiles does
not start the pod and says what to do; a node provisioned with
``megaflow sandbox seccomp-profile`` runs a root sandbox with only the
default capabilities, no privilege gain and the seccomp filter on; and a
non-root sandbox with ``disk_mb`` can write its sized volumes, no more, and
nothing else.
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from megaflow.cli.sandbox_cmd import app  # `megaflow sandbox`
from megaflow.core.errors import SandboxStartError
from megaflow.environment.abstract import EnvironmentSpec, SandboxResources
from megaflow.environment.config import KubernetesRuntimeConfig
from megaflow.environment.kubernetes import KubernetesRuntime
from megaflow.environment.kubernetes.security import ROOT_CAPABILITIES
from tests.environment.kubernetes.podman_kubelet import (
    ExecServer,
    PodmanCoreV1Api,
    provision_node,
)
from tests.environment.kubernetes.podman_pods import Refused, plan
from tests.environment.kubernetes.test_pod_security import _wire
from tests.fixtures.podman import PodmanService

CAP_BITS = {
    "CHOWN": 0, "DAC_OVERRIDE": 1, "FOWNER": 3, "FSETID": 4, "KILL": 5, "SETGID": 6,
    "SETUID": 7, "SETPCAP": 8, "NET_BIND_SERVICE": 10, "SYS_CHROOT": 18, "SETFCAP": 31,
}  # fmt: skip
ROOT = KubernetesRuntimeConfig(host_image="i:1", run_as_user=None)
Edit = Callable[[dict[str, Any]], None]
UNKNOWN: list[tuple[Edit, str]] = [
    (lambda w: w["spec"]["containers"][0].update(ports=[{"containerPort": 80}]),
     "spec.containers[0].ports"),
    (lambda w: w["spec"]["containers"][0]["securityContext"].update(procMount="Unmasked"),
     "spec.containers[0].securityContext.procMount"),
    (lambda w: w["spec"].update(hostPID=True), "spec.hostPID"),
    (lambda w: w["spec"]["volumes"].append({"name": "h", "hostPath": {"path": "/"}}),
     "spec.volumes[8].hostPath"),
    (lambda w: w["spec"]["volumes"][0]["emptyDir"].update(medium="HugePages"), "HugePages"),
    (lambda w: w["spec"].update(restartPolicy="Always"), "restartPolicy"),
    (lambda w: w["spec"]["containers"][0]["securityContext"].update(privileged=True),
     "privileged"),
    (lambda w: w["spec"]["containers"][0]["securityContext"]["seccompProfile"].update(
        localhostProfile="../escape.json"), "descending path"),
]  # fmt: skip


def test_the_stand_in_runs_each_field_and_refuses_what_it_does_not_know(tmp_path: Path) -> None:
    root = tmp_path / "seccomp"
    provision_node(root)
    wire = _wire(EnvironmentSpec(resources=SandboxResources(disk_mb=8)), ROOT)
    args = plan(wire, seccomp_root=root, node_dir=tmp_path / "node").run_args
    pairs = set(itertools.pairwise(args))
    assert ("--security-opt", f"seccomp={root}/megaflow/none.json") in pairs
    assert ("--security-opt", "no-new-privileges") in pairs
    assert {"--read-only", "--read-only-tmpfs=false"} <= set(args)
    assert ("--cap-drop", "ALL") in pairs
    assert {c for flag, c in pairs if flag == "--cap-add"} == set(ROOT_CAPABILITIES)
    played = plan(wire, seccomp_root=root, node_dir=tmp_path / "node")
    assert played.tmpfs == {tmp_path / "node" / v["name"]: 8 << 20 for v in wire["spec"]["volumes"]}
    assert len(played.tmpfs) == 8  # workspace, /tmp, /var/tmp, /root, /home, /run, state, shm
    binds = {m.split(",destination=")[1] for flag, m in pairs if flag == "--mount"}
    assert binds == {m["mountPath"] for m in wire["spec"]["containers"][0]["volumeMounts"]}
    for edit, field in UNKNOWN:
        bad = copy.deepcopy(wire)
        edit(bad)
        with pytest.raises(Refused, match=re.escape(field)):
            plan(bad, seccomp_root=root, node_dir=tmp_path / "node")


@pytest.fixture
def exec_server(podman_service: PodmanService) -> Iterator[ExecServer]:
    server = ExecServer(podman_service)
    yield server
    server.close()


@pytest.fixture
async def make_runtime(
    podman_service: PodmanService, exec_server: ExecServer, tmp_path: Path
) -> AsyncIterator[Callable[..., Any]]:
    made: list[KubernetesRuntime] = []

    async def make(seccomp_root: Path | None = None, **cfg: Any) -> KubernetesRuntime:
        api = PodmanCoreV1Api(podman_service, exec_server, tmp_path, seccomp_root)
        config = KubernetesRuntimeConfig(
            host_image=podman_service.image, image_pull_policy="Never", reap_interval_s=None,
            start_timeout_s=60, **cfg,
        )  # fmt: skip
        runtime = KubernetesRuntime(config, api=api)
        await runtime.start()
        made.append(runtime)
        return runtime

    yield make
    for runtime in made:
        await runtime.stop()
    assert podman_service.podman("pod", "ps", "-q").stdout.split() == []


@pytest.mark.container
async def test_a_node_without_the_profiles_does_not_start_the_pod(
    make_runtime: Callable[..., Any], tmp_path: Path
) -> None:
    empty = tmp_path / "unprovisioned"
    empty.mkdir()
    runtime = await make_runtime(empty)
    with pytest.raises(SandboxStartError, match="CreateContainerError") as err:
        await runtime.create(EnvironmentSpec())
    assert "megaflow sandbox seccomp-profile" in str(err.value)
    assert "megaflow/" in str(err.value)  # the folder the node lacks
    assert await runtime.list() == []  # the pod was deleted


@pytest.mark.container
async def test_a_node_provisioned_by_the_cli_holds_a_root_sandbox(
    make_runtime: Callable[..., Any], tmp_path: Path
) -> None:
    root = tmp_path / "kubelet-seccomp"
    (root / "megaflow").mkdir(parents=True)
    printed = CliRunner().invoke(app, ["seccomp-profile", "--network", "none"])
    assert printed.exit_code == 0, printed.output
    (root / "megaflow" / "none.json").write_text(printed.output)  # the documented step
    runtime = await make_runtime(root, run_as_user=None)
    async with await runtime.create(EnvironmentSpec()) as sb:
        status = await sb.exec("grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status")
        got = dict(line.split(":\t") for line in status.stdout.splitlines())
        assert int(got["CapEff"], 16) == sum(1 << CAP_BITS[c] for c in ROOT_CAPABILITIES)
        assert (got["NoNewPrivs"], got["Seccomp"]) == ("1", "2")
        userns = await sb.exec("unshare -U true")
        assert userns.exit_code != 0
        assert "Operation not permitted" in userns.stderr
        mount = await sb.exec("mkdir -p /tmp/m && mount -t tmpfs t /tmp/m")
        assert mount.exit_code != 0
        assert "permission denied" in mount.stderr, mount  # busybox's words for EPERM


@pytest.mark.container
async def test_a_non_root_sandbox_writes_its_sized_volumes_and_nothing_else(
    make_runtime: Callable[..., Any],
) -> None:
    runtime = await make_runtime()
    spec = EnvironmentSpec(files={"a.txt": "a\n"}, resources=SandboxResources(disk_mb=8))
    async with await runtime.create(spec) as sb:
        fill = "dd if=/dev/zero of=$0/f bs=1M count=$1 2>/dev/null; wc -c < $0/f; rm -f $0/f"
        for where in (".", "/tmp", "/root", "/home", "/dev/shm", "/.megaflow"):
            small = await sb.exec(["sh", "-c", fill, where, "4"])
            assert small.stdout == f"{4 << 20}\n", (where, small)
            big = await sb.exec(["sh", "-c", fill, where, "16"])
            assert 7 << 20 < int(big.stdout) <= 8 << 20, (where, big)  # then ENOSPC
        for where in ("/", "/etc", "/usr"):
            assert (await sb.exec(f"touch {where}/x")).exit_code != 0
        assert (await sb.exec("id -u")).stdout == "1000\n"
        await sb.exec("echo b > a.txt; echo t > /tmp/t")
        await sb.reset()  # the snapshot lives in its sized volume
        assert (await sb.exec("cat a.txt; ls /tmp")).stdout == "a\n"

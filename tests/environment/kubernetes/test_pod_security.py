"""What a sandbox pod may do, read from its wire form as a cluster reads it: the local
seccomp policy as a Localhost profile, dropped capabilities, and disk_mb on every
writable path (read-only root, a sized memory-backed emptyDir on each)."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest
from kubernetes import client as k8s
from typer.testing import CliRunner

from megaflow.cli.sandbox_cmd import app  # `megaflow sandbox`
from megaflow.environment.abstract import EnvironmentSpec, SandboxInfo, SandboxResources
from megaflow.environment.config import KubernetesRuntimeConfig
from megaflow.environment.container.seccomp import profile
from megaflow.environment.kubernetes.pods import run_owner, sandbox_pod
from megaflow.environment.kubernetes.profiles import profile_json
from megaflow.environment.kubernetes.security import ROOT_CAPABILITIES

CFG = KubernetesRuntimeConfig(host_image="registry.example/megaflow-sandbox:1")
WRITABLE = {"/workspace", "/tmp", "/var/tmp", "/root", "/home", "/run", "/.megaflow", "/dev/shm"}


def _wire(spec: EnvironmentSpec, cfg: KubernetesRuntimeConfig = CFG) -> dict[str, Any]:
    owner = run_owner(cfg, "r1")
    owner.metadata.uid = "owner-uid"
    now = time.time()
    info = SandboxInfo(
        id="megaflow-0123456789abcdef", runtime="kubernetes", owner="r1/t/0",
        created_at=now, deadline=now + spec.ttl_s,
    )  # fmt: skip
    pod = sandbox_pod(cfg, spec, info, owner, instance="i", creator="env-pod-1")
    wire: dict[str, Any] = k8s.ApiClient().sanitize_for_serialization(pod)
    assert k8s.V1Pod.from_dict(wire) == pod  # the client's models take it back unchanged
    return wire


def _box(wire: dict[str, Any]) -> dict[str, Any]:
    (box,) = wire["spec"]["containers"]
    return box  # type: ignore[no-any-return]


def test_the_seccomp_profile_is_the_nodes_file_for_the_pods_network() -> None:
    for network in ("none", "loopback"):
        ctx = _box(_wire(EnvironmentSpec(network=network)))["securityContext"]
        assert ctx["seccompProfile"] == {
            "type": "Localhost", "localhostProfile": f"megaflow/{network}.json",
        }  # fmt: skip
    moved = KubernetesRuntimeConfig(host_image="i:1", seccomp_profiles="sandboxes/v2")
    ctx = _box(_wire(EnvironmentSpec(), moved))["securityContext"]
    assert ctx["seccompProfile"]["localhostProfile"] == "sandboxes/v2/none.json"
    default = KubernetesRuntimeConfig(host_image="i:1", seccomp_profiles=None)
    assert _box(_wire(EnvironmentSpec(), default))["securityContext"]["seccompProfile"] == {
        "type": "RuntimeDefault"
    }
    for bad in ("/var/lib/kubelet/seccomp/x", "../x", "a/../b", "a//b", ""):
        with pytest.raises(ValueError, match="seccomp_profiles"):
            KubernetesRuntimeConfig(seccomp_profiles=bad)


def test_the_profile_file_is_the_local_policy_and_the_cli_prints_it() -> None:
    for network in ("none", "loopback"):
        text = profile_json(network)
        assert json.loads(text) == profile(network)
        out = CliRunner().invoke(app, ["seccomp-profile", "--network", network])
        assert out.exit_code == 0, out.output
        assert out.output == text
    rules = json.loads(profile_json("none"))["syscalls"]
    refused = {n for r in rules if r["action"] == "SCMP_ACT_ERRNO" for n in r["names"]}
    assert {"mount", "unshare", "clone", "setns", "socket"} <= refused
    newuser = next(r for r in rules if "unshare" in r["names"])
    assert newuser["args"][0]["op"] == "SCMP_CMP_MASKED_EQ"  # only CLONE_NEWUSER
    loopback = json.loads(profile_json("loopback"))["syscalls"]
    assert not [r for r in loopback if "socket" in r["names"]]  # inet sockets work there
    aarch = json.loads(profile_json("none", "aarch64"))
    assert aarch["architectures"] == ["SCMP_ARCH_AARCH64"]
    for args, word in ((["--network", "host"], "network"), (["--arch", "riscv64"], "riscv64")):
        out = CliRunner().invoke(app, ["seccomp-profile", *args])
        assert out.exit_code == 2, out.output
        assert word in out.output


def test_capabilities_are_dropped_and_root_keeps_only_the_default_few() -> None:
    ctx = _box(_wire(EnvironmentSpec()))["securityContext"]
    assert ctx["capabilities"] == {"drop": ["ALL"]}
    assert (ctx["allowPrivilegeEscalation"], ctx["privileged"]) == (False, False)
    root = KubernetesRuntimeConfig(host_image="i:1", run_as_user=None)
    ctx = _box(_wire(EnvironmentSpec(), root))["securityContext"]
    assert ctx["capabilities"] == {"drop": ["ALL"], "add": list(ROOT_CAPABILITIES)}
    assert not {"SYS_ADMIN", "NET_ADMIN", "NET_RAW", "MKNOD", "SYS_PTRACE"} & set(
        ctx["capabilities"]["add"]
    )
    assert (ctx["allowPrivilegeEscalation"], ctx["privileged"]) == (False, False)
    assert "runAsNonRoot" not in ctx


def _volumes(wire: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """mount path -> the emptyDir mounted there."""
    by_name = {v["name"]: v["emptyDir"] for v in wire["spec"]["volumes"]}
    mounts = _box(wire)["volumeMounts"]
    assert len({m["mountPath"] for m in mounts}) == len(mounts)  # an API server insists
    assert all(re.fullmatch(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?", n) for n in by_name)
    return {m["mountPath"]: by_name[m["name"]] for m in mounts}


def test_disk_mb_makes_the_root_read_only_and_sizes_every_writable_path() -> None:
    wire = _wire(EnvironmentSpec(resources=SandboxResources(disk_mb=64)))
    box = _box(wire)
    assert box["securityContext"]["readOnlyRootFilesystem"] is True
    volumes = _volumes(wire)
    assert set(volumes) == WRITABLE
    assert all(v == {"medium": "Memory", "sizeLimit": "64Mi"} for v in volumes.values())
    assert box["resources"]["limits"]["ephemeral-storage"] == "64Mi"
    # a workdir on one of those paths is that path's one volume
    wire = _wire(EnvironmentSpec(workdir="/tmp", resources=SandboxResources(disk_mb=8)))
    assert set(_volumes(wire)) == WRITABLE - {"/workspace"}


def test_without_disk_mb_the_root_and_node_disk_volumes_stay_unbounded() -> None:
    wire = _wire(EnvironmentSpec())
    box = _box(wire)
    assert "readOnlyRootFilesystem" not in box["securityContext"]
    assert _volumes(wire) == {"/workspace": {}, "/.megaflow": {}}
    assert "ephemeral-storage" not in box["resources"]["limits"]


def test_an_image_workspace_keeps_a_writable_root_under_the_ephemeral_storage_limit() -> None:
    image = KubernetesRuntimeConfig(host_image="i:1", workspace="image")
    wire = _wire(EnvironmentSpec(workdir="/testbed", resources=SandboxResources(disk_mb=64)), image)
    box = _box(wire)
    assert "readOnlyRootFilesystem" not in box["securityContext"]  # /testbed is the image's
    assert _volumes(wire) == {"/.megaflow": {}}
    assert box["resources"]["limits"]["ephemeral-storage"] == "64Mi"

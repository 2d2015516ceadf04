"""The pod the kubernetes runtime creates, checked as the client's own models."""

from __future__ import annotations

import time

import pytest
from kubernetes import client as k8s

from megaflow.core.errors import SandboxStartError
from megaflow.environment.abstract import EnvironmentSpec, SandboxInfo, SandboxResources
from megaflow.environment.config import EnvironmentConfig, KubernetesRuntimeConfig
from megaflow.environment.container.scripts import STATE_DIR
from megaflow.environment.kubernetes.exec import exit_status, untar_argv, wrap
from megaflow.environment.kubernetes.pods import (
    from_pod,
    label_value,
    owner_name,
    run_of,
    run_owner,
    sandbox_pod,
    stale,
)

CFG = KubernetesRuntimeConfig(host_image="registry.example/megaflow-sandbox:1")


def _pod(spec: EnvironmentSpec, cfg: KubernetesRuntimeConfig = CFG, holder: str = "r1/t/0"):
    owner = run_owner(cfg, run_of(holder, "inst"))
    owner.metadata.uid = "owner-uid"
    now = time.time()
    info = SandboxInfo(
        id="megaflow-0123456789abcdef", runtime="kubernetes", owner=holder,
        created_at=now, deadline=now + spec.ttl_s,
    )  # fmt: skip
    return sandbox_pod(cfg, spec, info, owner, instance="inst", creator="env-pod-1")


def test_pod_carries_limits_labels_deadline_owner_and_a_locked_down_context() -> None:
    spec = EnvironmentSpec(
        resources=SandboxResources(cpus=1.5, memory_mb=2048, disk_mb=512),
        ttl_s=1200, env={"A": "1"},
    )  # fmt: skip
    pod = _pod(spec)
    wire = k8s.ApiClient().sanitize_for_serialization(pod)
    assert k8s.V1Pod.from_dict(wire) == pod  # valid for the client's models, both ways
    meta, podspec = wire["metadata"], wire["spec"]
    (box,) = podspec["containers"]
    assert box["resources"]["limits"] == {
        "cpu": "1500m", "memory": "2048Mi", "ephemeral-storage": "512Mi",
    }  # fmt: skip
    assert box["resources"]["requests"] == box["resources"]["limits"]  # Guaranteed QoS
    assert meta["labels"] == {
        "megaflow.io/owner": "megaflow", "megaflow.io/run": "r1",
        "megaflow.io/sandbox": "megaflow-0123456789abcdef", "megaflow.io/instance": "inst",
        "megaflow.io/network": "none",
    }  # fmt: skip
    assert meta["annotations"]["megaflow.io/holder"] == "r1/t/0"
    assert podspec["activeDeadlineSeconds"] == 1200 + CFG.deadline_grace_s > spec.ttl_s
    (ref,) = meta["ownerReferences"]
    assert ref == {
        "apiVersion": "v1", "kind": "ConfigMap", "name": owner_name(CFG, "r1"),
        "uid": "owner-uid", "controller": False, "blockOwnerDeletion": False,
    }  # fmt: skip
    assert podspec["automountServiceAccountToken"] is False
    assert podspec["enableServiceLinks"] is False
    assert podspec["restartPolicy"] == "Never"
    assert podspec["shareProcessNamespace"] is True  # the pause process reaps orphans
    assert podspec["securityContext"] == {
        "runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000, "runAsNonRoot": True,
    }  # fmt: skip
    ctx = box["securityContext"]
    assert ctx["allowPrivilegeEscalation"] is False
    assert ctx["privileged"] is False
    assert ctx["runAsNonRoot"] is True
    assert ctx["capabilities"] == {"drop": ["ALL"]}
    assert ctx["readOnlyRootFilesystem"] is True  # disk_mb: only sized volumes are writable
    assert ctx["seccompProfile"] == {"type": "Localhost", "localhostProfile": "megaflow/none.json"}
    assert box["image"] == CFG.host_image
    assert box["env"] == [{"name": "A", "value": "1"}]
    mounts = {m["mountPath"] for m in box["volumeMounts"]}
    assert {"/workspace", STATE_DIR} <= mounts  # writable for a non-root uid


def test_root_images_and_requests_below_limits() -> None:
    cfg = KubernetesRuntimeConfig(run_as_user=None, request_share=0.25, runtime_class="gvisor")
    pod = _pod(EnvironmentSpec(image="swebench/sweb.eval.x86_64.django:latest"), cfg)
    box = pod.spec.containers[0]
    assert pod.spec.security_context.run_as_user is None
    assert box.security_context.run_as_non_root is None
    assert box.security_context.allow_privilege_escalation is False
    assert box.resources.requests == {"cpu": "250m", "memory": "256Mi"}
    assert pod.spec.runtime_class_name == "gvisor"
    # an image carrying its repository in the workdir keeps it: no volume hides it
    kept = _pod(
        EnvironmentSpec(workdir="/testbed"),
        KubernetesRuntimeConfig(host_image="i:1", workspace="image"),
    )
    assert [m.mount_path for m in kept.spec.containers[0].volume_mounts] == [STATE_DIR]
    assert [v.name for v in kept.spec.volumes] == ["state"]


def test_what_a_cluster_cannot_run_is_a_start_error() -> None:
    with pytest.raises(SandboxStartError, match="network 'host'"):
        _pod(EnvironmentSpec(network="host"))
    with pytest.raises(SandboxStartError, match="path on this host"):
        _pod(EnvironmentSpec(image="/tmp/rootfs.tar"))
    with pytest.raises(SandboxStartError, match="host_image"):
        _pod(EnvironmentSpec(), KubernetesRuntimeConfig())


def test_run_ids_become_valid_labels_and_owner_names() -> None:
    assert run_of("run-7/task/0", "i") == "run-7"
    assert run_of(None, "abc") == "-abc"
    long = "x" * 100 + "/ü"
    for value in ("run-7", long, "-abc", "a b/c", "ü"):
        v = label_value(value)
        assert len(v) <= 63
        assert v[0].isalnum()
        assert v[-1].isalnum()
        assert set(v) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._")
    assert label_value("run-7") == "run-7"
    assert label_value(long) != label_value(long + "x")
    name = owner_name(CFG, long)
    assert len(name) <= 63
    assert name == name.lower()


def test_listed_pods_read_back_and_the_reaper_rules() -> None:
    now = time.time()
    pod = _pod(EnvironmentSpec(ttl_s=600))
    pod.status = k8s.V1PodStatus(phase="Running")
    info = from_pod(pod)
    assert (info.id, info.owner, info.state) == ("megaflow-0123456789abcdef", "r1/t/0", "ready")
    assert abs(info.deadline - (now + 600)) < 5
    live = {"r1"}
    assert stale(pod, now, start_timeout_s=60, live_runs=live) is None
    assert stale(pod, now + 601, start_timeout_s=60, live_runs=live) == "deadline"
    assert stale(pod, now, start_timeout_s=60, live_runs=set()) == "run gone"
    pod.status.phase = "Failed"  # activeDeadlineSeconds struck, or its keeper died
    assert stale(pod, now, start_timeout_s=60, live_runs=live) == "ended"
    pod.status.phase = "Pending"
    assert stale(pod, now + 10, start_timeout_s=60, live_runs=live) is None
    assert stale(pod, now + 100, start_timeout_s=60, live_runs=live) == "stuck"
    pod.metadata.deletion_timestamp = "2026-01-01T00:00:00Z"
    assert stale(pod, now + 601, start_timeout_s=60, live_runs=live) is None  # already going


def test_exec_wrapping_and_status_channel() -> None:
    argv = wrap(["ls", "-l"], {"B": "2", "A": "x=y"}, "/workspace/sub", "tag1")
    assert argv[:5] == ["/bin/sh", "-c", argv[2], "sh", "/workspace/sub"]
    assert argv[5:] == ["A=x=y", "B=2", "MEGAFLOW_EXEC_ID=tag1", "ls", "-l"]
    assert untar_argv("/w", 10240)[-2:] == ["/w", "10240"]
    assert exit_status(b'{"status":"Success"}') == (0, "")
    fail = (
        b'{"status":"Failure","reason":"NonZeroExitCode",'
        b'"details":{"causes":[{"reason":"ExitCode","message":"3"}]}}'
    )
    assert exit_status(fail) == (3, "")
    code, why = exit_status(b'{"status":"Failure","message":"exec: \\"nope\\": not found"}')
    assert code is None
    assert "not found" in why


def test_config_names_the_backend_and_builds_it_lazily() -> None:
    cfg = EnvironmentConfig.model_validate(
        {"runtime": {"type": "kubernetes", "namespace": "sandboxes", "host_image": "img:1"}}
    )
    assert isinstance(cfg.runtime, KubernetesRuntimeConfig)
    runtime = cfg.runtime.build()
    assert runtime.name == "kubernetes"
    with pytest.raises(ValueError, match="namespace"):
        EnvironmentConfig.model_validate({"runtime": {"type": "kubernetes", "namespace": "Bad_"}})

"""The manifests under deploy/kubernetes/, read as a cluster would get them (rendered
with the tiny renderer) and checked against the code: the cluster config they carry,
the ports, probes, token, resources, security context and the sandbox runtime's RBAC."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from megaflow.environment.abstract import EnvironmentSpec, SandboxInfo
from megaflow.environment.config import KubernetesRuntimeConfig
from megaflow.environment.kubernetes import KubernetesRuntime
from megaflow.environment.kubernetes.pods import run_owner, sandbox_pod
from megaflow.rpc.config import SERVABLE, ClusterConfig
from tests.environment.kubernetes.fake_api import FakeCoreV1Api, Result
from tests.environment.kubernetes.kustomize import DEPLOY, by_kind, render

CONFIG_PATH = "/etc/megaflow/cluster.yaml"
# what each CoreV1Api call the runtime makes needs from RBAC: (resource, verbs)
RBAC = {
    "create_namespaced_pod": ("pods", {"create"}),
    "read_namespaced_pod": ("pods", {"get"}),
    "list_namespaced_pod": ("pods", {"list"}),
    "delete_namespaced_pod": ("pods", {"delete"}),
    "connect_get_namespaced_pod_exec": ("pods/exec", {"create", "get"}),
    "create_namespaced_config_map": ("configmaps", {"create"}),
    "read_namespaced_config_map": ("configmaps", {"get"}),
    "list_namespaced_config_map": ("configmaps", {"list"}),
    "delete_namespaced_config_map": ("configmaps", {"delete"}),
}


MODELS = {
    "Namespace": k8s.V1Namespace, "ConfigMap": k8s.V1ConfigMap,
    "ServiceAccount": k8s.V1ServiceAccount, "Role": k8s.V1Role,
    "RoleBinding": k8s.V1RoleBinding, "NetworkPolicy": k8s.V1NetworkPolicy,
    "Deployment": k8s.V1Deployment, "Service": k8s.V1Service,
}  # fmt: skip


def round_trip(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` read into the client's model of its kind and written back: a field the
    API does not know (a typo) is dropped, a value of the wrong type refused."""
    model = MODELS[obj["kind"]].from_dict(obj)
    back: dict[str, Any] = k8s.ApiClient().sanitize_for_serialization(model)
    return back


@pytest.mark.parametrize("where", ["base", "overlays/production"])
def test_every_object_is_valid_for_the_clients_models(where: str) -> None:
    objects = render(DEPLOY / where)
    assert {o["kind"] for o in objects} == set(MODELS)
    for obj in objects:
        assert round_trip(obj) == obj, (obj["kind"], obj["metadata"]["name"])
    typo = json_copy(by_kind(objects, "Deployment")["megaflow-agent"])
    typo["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    assert round_trip(typo) != typo  # the check catches a misspelt field


def json_copy(obj: dict[str, Any]) -> dict[str, Any]:
    copied: dict[str, Any] = json.loads(json.dumps(obj))
    return copied


def cluster_config(objects: list[dict[str, Any]]) -> ClusterConfig:
    data = by_kind(objects, "ConfigMap")["megaflow-cluster"]["data"]["cluster.yaml"]
    return ClusterConfig.model_validate(yaml.safe_load(data))


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def _ports(cfg: ClusterConfig, service: str) -> set[int]:
    ep = cfg.endpoint(service)  # type: ignore[arg-type]
    ports = {ep.port, ep.metrics_port, getattr(ep, "http_port", None)}
    if service == "scheduler" and cfg.dashboard is not None:
        ports.add(cfg.dashboard.port)
    return {p for p in ports if p is not None}


def test_every_service_has_a_deployment_and_service_matching_the_config() -> None:
    objects = render(DEPLOY / "base")
    cfg = cluster_config(objects)
    deployments, services = by_kind(objects, "Deployment"), by_kind(objects, "Service")
    assert set(deployments) == {f"megaflow-{s}" for s in SERVABLE} == set(services)
    for service in SERVABLE:
        name = f"megaflow-{service}"
        ep = cfg.endpoint(service)
        assert (ep.host, ep.listen) == (name, "0.0.0.0")  # found by its Service, on every interface
        box = _container(deployments[name])
        assert box["command"] == ["megaflow", "serve", service, "--config", CONFIG_PATH]
        probe = ["python", "-m", "megaflow.rpc.probe", service, "--config", CONFIG_PATH]
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert box[kind]["exec"]["command"] == probe, (service, kind)
        assert {p["containerPort"] for p in box["ports"]} == _ports(cfg, service)
        named = {p["name"]: p["containerPort"] for p in box["ports"]}
        for port in services[name]["spec"]["ports"]:
            assert named[port["targetPort"]] == port["port"]
        assert (
            services[name]["spec"]["selector"]
            == deployments[name]["spec"]["selector"]["matchLabels"]
        )
        res = box["resources"]
        assert set(res) == {"requests", "limits"}
        assert set(res["requests"]) == set(res["limits"]) == {"cpu", "memory"}
        env = {e["name"]: e for e in box["env"]}
        assert cfg.auth.token_env is not None
        assert env[cfg.auth.token_env]["valueFrom"]["secretKeyRef"] == {
            "name": "megaflow-token", "key": "token",
        }  # fmt: skip
        pod = deployments[name]["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        ctx = box["securityContext"]
        assert ctx["allowPrivilegeEscalation"] is False
        assert ctx["readOnlyRootFilesystem"] is True
        assert ctx["capabilities"] == {"drop": ["ALL"]}
        assert pod["automountServiceAccountToken"] is (service == "environment")
        mounts = {m["mountPath"]: m["name"] for m in box["volumeMounts"]}
        assert mounts["/etc/megaflow"] == "config"


async def test_the_sandbox_runtime_config_rbac_and_network_policy_fit_the_runtime() -> None:
    objects = render(DEPLOY / "base")
    cfg = cluster_config(objects)
    runtime = cfg.environment.runtime
    assert isinstance(runtime, KubernetesRuntimeConfig)
    namespace = by_kind(objects, "Namespace")
    assert list(namespace) == [runtime.namespace]
    accounts = by_kind(objects, "ServiceAccount")
    assert accounts[runtime.service_account or ""]["automountServiceAccountToken"] is False
    env_pod = by_kind(objects, "Deployment")["megaflow-environment"]["spec"]["template"]["spec"]
    binding = by_kind(objects, "RoleBinding")["megaflow-environment-sandboxes"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": env_pod["serviceAccountName"],
         "namespace": runtime.namespace},
    ]  # fmt: skip
    rules = by_kind(objects, "Role")[binding["roleRef"]["name"]]["rules"]
    granted = {(r, v) for rule in rules for r in rule["resources"] for v in rule["verbs"]}

    # every call the runtime makes in a lifecycle (start, exec, reap, finish, stop) is allowed
    async def lifecycle() -> set[str]:
        api = FakeCoreV1Api(lambda *_: Result(stdout=b"ok"))
        rt = KubernetesRuntime(runtime.model_copy(update={"reap_interval_s": None}), api=api)
        other = KubernetesRuntime(runtime.model_copy(update={"reap_interval_s": None}), api=api)
        await rt.start()
        sb = await rt.create(EnvironmentSpec(image="img:1", files={"a": "b"}), owner="r/t/0")
        await other.create(EnvironmentSpec(image="img:1"), owner="r/t/1")  # owner found: read
        await sb.exec("true")
        await rt.reap_orphans()
        await rt.finish_run("r")
        await other.stop()
        await rt.stop()
        return set(api.names())

    used = await lifecycle()
    assert used == set(RBAC)
    for method in used:
        resource, verbs = RBAC[method]
        assert {(resource, v) for v in verbs} <= granted, method

    (policy,) = by_kind(objects, "NetworkPolicy").values()
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert "ingress" not in policy["spec"]
    assert "egress" not in policy["spec"]
    owner = run_owner(runtime, "r")
    owner.metadata.uid = "u"
    now = time.time()
    info = SandboxInfo(id="megaflow-x", runtime="kubernetes", created_at=now, deadline=now + 60)
    labels = sandbox_pod(
        runtime, EnvironmentSpec(), info, owner, instance="i", creator="c"
    ).metadata.labels
    for term in policy["spec"]["podSelector"]["matchExpressions"]:
        assert term["key"] in labels
        if term["operator"] == "In":
            assert labels[term["key"]] in term["values"]


def test_the_overlay_sets_images_and_replicas() -> None:
    objects = render(DEPLOY / "overlays" / "production")
    deployments = by_kind(objects, "Deployment")
    images = {_container(d)["image"] for d in deployments.values()}
    assert images == {"registry.example.com/megaflow/megaflow:0.1.0"}
    assert deployments["megaflow-agent"]["spec"]["replicas"] == 2
    assert all(
        o["metadata"].get("namespace") == "megaflow" for o in objects if o["kind"] != "Namespace"
    )

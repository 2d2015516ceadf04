"""The manifests' pod specs run for real with ``podman kube play``, and so does a sandbox pod.

No Kubernetes API server can run here, so this is how the Deployments are
validated: each one's pod template is played by Podman (rootful, the test
service's private storage) with the rendered ConfigMap and the token Secret
(as a Podman secret, since ``secretKeyRef`` reads those), the MegaFlow
process starts from the manifest's own command, and the test runs the
readiness and liveness probes' exec commands in the container until they
answer; then ``podman kube play --down`` and nothing is left (pods,
containers, volumes, the secret).

What the test changes, because nothing can be pulled or reached here: the
image (a local one imported from an almost empty root filesystem, with the
host's ``/usr``, Python and this checkout bound in read-only as hostPath
volumes); the pod's network (``--network none``: each pod plays alone and
its probes use loopback, so the containers' ``ports``, which Podman would
publish on a bridge, are dropped; ``test_manifests`` checks them); and, in
the ConfigMap's cluster config, the stores (SQLite and local files under the
pod's state volume instead of PostgreSQL, Redis and S3) and the
environment's runtime (``dummy``: the ``kubernetes`` runtime needs an API
server). Command, env, probes, resources, security context and the config
and state mounts are played as written.
"""

from __future__ import annotations

import base64
import io
import json
import secrets
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

import megaflow
from megaflow.environment.abstract import EnvironmentSpec, SandboxInfo
from megaflow.environment.config import KubernetesRuntimeConfig
from megaflow.environment.kubernetes.pods import run_owner, sandbox_pod
from megaflow.rpc.config import SERVABLE
from tests.environment.kubernetes.kustomize import DEPLOY, by_kind, render
from tests.fixtures.podman import PodmanService

pytestmark = pytest.mark.container

IMAGE = "localhost/megaflow-kube-play:test"
SRC = Path(megaflow.__file__).resolve().parents[1]  # the checkout's src/ (editable install)
VENV = Path(sys.prefix).resolve()  # mounted where it really is: a linked venv's link is not
HOST_PATHS = sorted({"/usr", sys.base_prefix, str(VENV), str(SRC)})
PROBE_WAIT_S = 25.0


def _service_rootfs() -> bytes:
    """Mount points and merged-/usr links; the host's /usr fills the rest."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, mode, uid in (
            ("etc", 0o755, 0), ("root", 0o755, 0), ("tmp", 0o1777, 0), ("usr", 0o755, 0),
            ("var", 0o755, 0), ("var/lib", 0o755, 0), ("var/lib/megaflow", 0o755, 1000),
            ("dev", 0o755, 0), ("proc", 0o755, 0), ("sys", 0o755, 0),
        ):  # fmt: skip
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.uid, info.gid = tarfile.DIRTYPE, mode, uid, uid
            tar.addfile(info)
        for link in ("bin", "lib", "lib64", "sbin"):
            info = tarfile.TarInfo(link)
            info.type, info.linkname = tarfile.SYMTYPE, f"usr/{link}"
            tar.addfile(info)
    return buf.getvalue()


@pytest.fixture(scope="module")
def service_image(podman_service: PodmanService, tmp_path_factory: pytest.TempPathFactory) -> str:
    tar = tmp_path_factory.mktemp("kube-play") / "rootfs.tar"
    tar.write_bytes(_service_rootfs())
    path = f"PATH={VENV}/bin:/usr/local/bin:/usr/bin:/bin"
    r = podman_service.podman(
        "import", "--change", f"ENV {path}", "--change", "WORKDIR /var/lib/megaflow",
        str(tar), IMAGE,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return IMAGE


def _played_config(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """The ConfigMap, its cluster config with stores and runtime this machine has."""
    cm = json.loads(json.dumps(by_kind(objects, "ConfigMap")["megaflow-cluster"]))
    cfg = yaml.safe_load(cm["data"]["cluster.yaml"])
    cfg["scheduler"]["storage"] = {
        "metadata": {"type": "sqlite", "path": "/var/lib/megaflow/megaflow.db"},
        "artifacts": {"type": "local", "root": "/var/lib/megaflow/artifacts"},
    }
    cfg["environment"]["runtime"] = {"type": "dummy"}
    cm["data"]["cluster.yaml"] = yaml.safe_dump(cfg)
    cm["metadata"].pop("namespace", None)
    return cm


def _played_deployment(deployment: dict[str, Any], image: str) -> dict[str, Any]:
    played = json.loads(json.dumps(deployment))
    played["metadata"].pop("namespace", None)
    pod = played["spec"]["template"]["spec"]
    (box,) = pod["containers"]
    box["image"] = image
    box.pop("ports")  # Podman publishes them, which needs a bridge; the probes use loopback
    for i, path in enumerate(HOST_PATHS):
        pod["volumes"].append({"name": f"host{i}", "hostPath": {"path": path, "type": "Directory"}})
        box["volumeMounts"].append({"name": f"host{i}", "mountPath": path, "readOnly": True})
    return played


def _token_secret(podman: PodmanService, name: str, key: str) -> str:
    token = secrets.token_urlsafe(32)
    data = json.dumps({key: base64.b64encode(token.encode()).decode()})
    path = Path(podman.env.get("TMPDIR", "/tmp")) / f"megaflow-secret-{secrets.token_hex(4)}.json"
    path.write_text(data)
    try:
        r = podman.podman("secret", "create", name, str(path))
    finally:
        path.unlink()
    assert r.returncode == 0, r.stderr
    return token


def _state(podman: PodmanService) -> dict[str, list[str]]:
    out = {}
    for what, args in {
        "pods": ("pod", "ps", "-q"), "containers": ("ps", "-aq"),
        "volumes": ("volume", "ls", "-q"), "secrets": ("secret", "ls", "--format", "{{.Name}}"),
    }.items():  # fmt: skip
        r = podman.podman(*args)
        assert r.returncode == 0, r.stderr
        out[what] = sorted(r.stdout.split())
    return out


def _probe_until_ok(podman: PodmanService, ctr: str, command: list[str]) -> tuple[float, str]:
    """Run a probe's exec command in the container until it exits 0: (seconds, what the
    first failed try said, if one did)."""
    t0 = time.monotonic()
    first = last = ""
    while time.monotonic() - t0 < PROBE_WAIT_S:
        r = podman.podman("exec", ctr, *command, timeout=60)
        last = (r.stdout + r.stderr).strip()
        if r.returncode == 0:
            return time.monotonic() - t0, first
        first = first or f"exit {r.returncode}: {last}"
        time.sleep(0.5)
    logs = podman.podman("logs", ctr).stdout + podman.podman("logs", ctr).stderr
    pytest.fail(f"probe {command} never answered in {PROBE_WAIT_S}s: {last}\nlogs:\n{logs[-3000:]}")


@pytest.mark.parametrize("service", SERVABLE)
def test_deployment_plays_and_answers_its_probes(
    podman_service: PodmanService, service_image: str, tmp_path: Path, service: str
) -> None:
    objects = render(DEPLOY / "base")
    deployment = by_kind(objects, "Deployment")[f"megaflow-{service}"]
    (box,) = deployment["spec"]["template"]["spec"]["containers"]
    secret_ref = next(e for e in box["env"] if e["name"] == "MEGAFLOW_TOKEN")
    ref = secret_ref["valueFrom"]["secretKeyRef"]
    before = _state(podman_service)
    kube = tmp_path / "play.yaml"
    kube.write_text(
        yaml.safe_dump_all([_played_config(objects), _played_deployment(deployment, service_image)])
    )
    _token_secret(podman_service, ref["name"], ref["key"])
    try:
        t0 = time.monotonic()
        r = podman_service.podman("kube", "play", "--network", "none", str(kube), timeout=120)
        assert r.returncode == 0, r.stderr
        ctr = f"{deployment['metadata']['name']}-pod-0-{box['name']}"
        info = json.loads(podman_service.podman("inspect", ctr).stdout)[0]
        assert info["Config"]["User"] == "1000:1000"
        assert info["HostConfig"]["ReadonlyRootfs"] is True
        assert info["HostConfig"]["Memory"] > 0
        command = box["readinessProbe"]["exec"]["command"]
        ready_s, before_ready = _probe_until_ok(podman_service, ctr, command)
        live_s, _ = _probe_until_ok(podman_service, ctr, box["livenessProbe"]["exec"]["command"])
        print(
            f"\n[kube play] {deployment['metadata']['name']}: `{' '.join(box['command'])}` as "
            f"uid {info['Config']['User']}, memory limit {info['HostConfig']['Memory'] >> 20} "
            f"MiB, read-only root. Readiness probe `{' '.join(command)}`: exit 0 "
            f"{time.monotonic() - t0:.1f}s after play ({ready_s:.1f}s of probing; before: "
            f"{before_ready or 'none failed'}); liveness probe: exit 0 ({live_s:.1f}s)"
        )
    finally:
        down = podman_service.podman("kube", "play", "--down", str(kube), timeout=120)
        podman_service.podman("secret", "rm", ref["name"])
        after = _state(podman_service)
        for volume in set(after["volumes"]) - set(before["volumes"]):  # ConfigMap volumes stay
            podman_service.podman("volume", "rm", "-f", volume)
    assert down.returncode == 0, down.stderr
    assert _state(podman_service) == before, "kube play left something behind"


def test_a_sandbox_pod_plays_non_root_with_a_writable_workspace(
    podman_service: PodmanService, tmp_path: Path
) -> None:
    """The pod the kubernetes runtime would create, played on the busybox image: the
    keeper starts as uid 1000 with no capabilities, the workspace and state volumes
    are writable, and the runtime's scripts run."""
    cfg = KubernetesRuntimeConfig(host_image=podman_service.image, image_pull_policy="Never")
    owner = run_owner(cfg, "play")
    owner.metadata.uid = "00000000-0000-0000-0000-000000000000"
    now = time.time()
    info = SandboxInfo(
        id="megaflow-kubeplay0000001", runtime="kubernetes", created_at=now, deadline=now + 60,
    )  # fmt: skip
    # a workdir the image lacks: Podman fills a fresh volume from the image's directory
    # (owner included), where Kubernetes mounts an empty, writable one
    spec = EnvironmentSpec(ttl_s=60, workdir="/sandbox")
    pod = sandbox_pod(cfg, spec, info, owner, instance="i", creator="test")
    wire = k8s.ApiClient().sanitize_for_serialization(pod)
    wire["metadata"].pop("ownerReferences")  # its owner lives in an API server, not here
    wire["metadata"].pop("namespace")
    kube = tmp_path / "sandbox.yaml"
    kube.write_text(yaml.safe_dump(wire))
    before = _state(podman_service)
    try:
        r = podman_service.podman("kube", "play", "--network", "none", str(kube), timeout=120)
        assert r.returncode == 0, r.stderr
        ctr = f"{info.id}-sandbox"
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            keeper = podman_service.podman("exec", ctr, "cat", "/dev/shm/megaflow-keeper.pid")
            if keeper.returncode == 0 and keeper.stdout.strip():
                break
            time.sleep(0.2)
        script = (
            "id -u; grep CapEff /proc/self/status; echo hi > /sandbox/f && cat /sandbox/f; "
            "ls /.megaflow"
        )
        r = podman_service.podman("exec", ctr, "/bin/sh", "-c", script)
        assert r.returncode == 0, r.stderr
        uid, caps, hi, snap = r.stdout.split("\n")[:4]
        assert uid == "1000"
        assert caps.split()[-1] == "0000000000000000"
        assert hi == "hi"
        assert snap == "workspace.tar"  # the keeper's snapshot, in the state volume
        print(f"\n[kube play] sandbox pod {info.id}: uid {uid}, {caps.strip()}, workspace ok")
    finally:
        down = podman_service.podman("kube", "play", "--down", str(kube), timeout=120)
        for volume in set(_state(podman_service)["volumes"]) - set(before["volumes"]):
            podman_service.podman("volume", "rm", "-f", volume)
    assert down.returncode == 0, down.stderr
    assert _state(podman_service) == before

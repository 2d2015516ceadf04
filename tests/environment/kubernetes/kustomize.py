"""A tiny kustomize renderer for the manifests under ``deploy/kubernetes/`` (no kubectl here).

It understands what those kustomizations use and refuses anything else, so a
feature added to them without a renderer for it fails the tests instead of
being skipped: ``resources`` (files, or directories holding a
kustomization), ``namespace`` (set on every namespaced object and on
ServiceAccount subjects of RoleBindings), ``images`` (``newName`` /
``newTag`` by image name) and ``replicas``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

DEPLOY = Path(__file__).resolve().parents[3] / "deploy" / "kubernetes"
KNOWN = {"apiVersion", "kind", "namespace", "resources", "images", "replicas"}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding"}


def render(directory: Path) -> list[dict[str, Any]]:
    """The objects ``directory``'s kustomization.yaml builds."""
    spec = yaml.safe_load((directory / "kustomization.yaml").read_text())
    unknown = set(spec) - KNOWN
    if unknown:
        raise ValueError(f"{directory}/kustomization.yaml: no renderer for {sorted(unknown)}")
    objects: list[dict[str, Any]] = []
    for entry in spec.get("resources", []):
        path = (directory / entry).resolve()
        if path.is_dir():
            objects += render(path)
        else:
            objects += [d for d in yaml.safe_load_all(path.read_text()) if d]
    if "namespace" in spec:
        for obj in objects:
            if obj["kind"] not in CLUSTER_SCOPED:
                obj["metadata"]["namespace"] = spec["namespace"]
            for subject in obj.get("subjects", []):
                if subject.get("kind") == "ServiceAccount":
                    subject["namespace"] = spec["namespace"]
    for image in spec.get("images", []):
        for container in _containers(objects):
            name, _, tag = container["image"].partition(":")
            if name == image["name"]:
                container["image"] = f"{image.get('newName', name)}:{image.get('newTag', tag)}"
    for rep in spec.get("replicas", []):
        found = [
            o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == rep["name"]
        ]
        if not found:
            raise ValueError(f"{directory}: replicas for unknown Deployment {rep['name']!r}")
        for obj in found:
            obj["spec"]["replicas"] = rep["count"]
    return objects


def _containers(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        c
        for o in objects
        if o["kind"] == "Deployment"
        for c in o["spec"]["template"]["spec"]["containers"]
    ]


def by_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}

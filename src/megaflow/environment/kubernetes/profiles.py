"""The seccomp profile files a node needs for sandbox pods, and the names pods give them.

A pod's ``Localhost`` seccomp profile is a file on its node, under the
kubelet's seccomp root (``/var/lib/kubelet/seccomp``), that the pod names by
its path relative to that root: ``<seccomp_profiles>/<network>.json``. Its
text is the container runtime's policy
(:mod:`megaflow.environment.container.seccomp`, built from the local
runtime's tables), one file per network a pod may ask for. ``megaflow
sandbox seccomp-profile`` prints it; nothing here needs the Kubernetes
client.
"""

from __future__ import annotations

import json

from megaflow.environment.config import KubernetesRuntimeConfig
from megaflow.environment.container.seccomp import profile

NETWORKS = ("none", "loopback")  # what a pod may ask for; 'host' is refused


def profile_path(config: KubernetesRuntimeConfig, network: str) -> str | None:
    """The profile a pod with ``network`` names, relative to the kubelet's seccomp
    root; None when the config asks for the container runtime's default profile."""
    if config.seccomp_profiles is None:
        return None
    return f"{config.seccomp_profiles}/{network}.json"


def profile_json(network: str, arch: str | None = None) -> str:
    """The text of the profile file for ``network`` on a node of machine ``arch``
    (default: this one's). Raises ``SandboxStartError`` for an unknown machine."""
    return json.dumps(profile(network, arch), indent=1) + "\n"

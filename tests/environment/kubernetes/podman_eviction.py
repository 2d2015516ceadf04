"""The kubelet's ephemeral-storage eviction, for pods the Podman stand-in runs.

A kubelet measures each container's local ephemeral storage (its writable
layer, its logs, and the pod's node-disk ``emptyDir`` volumes) every few
seconds and evicts a pod whose container is over its ``ephemeral-storage``
limit: the containers are killed, the pod's phase becomes ``Failed`` with
reason ``Evicted`` and a message naming the limit, and it stays so until
deleted. :class:`Evictions` does the same on a thread: a container's writable
layer is what its root directory (``podman mount``; the test service's
``vfs`` storage gives each container a full copy of its image) holds beyond
what it held when the container started. Memory-backed volumes count against
memory, as on a node, not here.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

from kubernetes.utils import parse_quantity

from tests.fixtures.podman import PodmanService

HOUSEKEEPING_S = 0.5  # a kubelet's is 10 s; tests need not wait that long


def disk_usage(root: Path) -> int:
    """Bytes of disk the files below ``root`` take (as ``du``), links not followed;
    0 for a path that is gone."""
    total = 0
    for top, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            try:
                total += os.lstat(os.path.join(top, name)).st_blocks * 512
            except OSError:
                continue
    return total


@dataclass
class Watched:
    """One pod whose container has an ``ephemeral-storage`` limit."""

    container: str  # Podman's name of it
    box: str  # the pod spec's name of it
    limit: int
    quantity: str  # the limit as the pod spec wrote it ("64Mi")
    rootfs: Path
    baseline: int  # the root's usage at start: the image's own files
    volumes: list[Path]  # the pod's node-disk emptyDir directories

    def usage(self) -> int:
        layer = max(disk_usage(self.rootfs) - self.baseline, 0)
        return layer + sum(disk_usage(v) for v in self.volumes)


class Evictions:
    """Pods watched against their limit; ``evicted[name]`` is the kubelet's message
    for each one evicted (its container killed)."""

    def __init__(self, podman: PodmanService) -> None:
        self.podman = podman
        self.evicted: dict[str, str] = {}
        self._watched: dict[str, Watched] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def watch(self, pod: str, container: str, box: str, quantity: str, volumes: list[Path]) -> None:
        """Start watching ``pod`` (its container just started)."""
        mounted = self.podman.podman("mount", container)
        if mounted.returncode != 0:
            raise RuntimeError(f"podman mount {container}: {mounted.stderr}")
        root = Path(mounted.stdout.strip())
        with self._lock:
            limit = int(parse_quantity(quantity))
            self._watched[pod] = Watched(
                container, box, limit, quantity, root, disk_usage(root), volumes
            )
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._housekeeping, daemon=True)
                self._thread.start()

    def forget(self, pod: str) -> None:
        with self._lock:
            self._watched.pop(pod, None)
        self.evicted.pop(pod, None)

    def _housekeeping(self) -> None:
        stop = threading.Event()
        while not stop.wait(HOUSEKEEPING_S):
            with self._lock:
                if not self._watched:
                    self._thread = None
                    return
                watched = list(self._watched.items())
            for pod, w in watched:
                if w.usage() > w.limit:
                    self._evict(pod, w)

    def _evict(self, pod: str, w: Watched) -> None:
        # the kubelet's words for a container over its own limit
        self.evicted[pod] = (
            f'Container {w.box} exceeded its local ephemeral storage limit "{w.quantity}". '
        )
        with self._lock:
            self._watched.pop(pod, None)
        self.podman.podman("pod", "kill", "--signal", "KILL", pod, timeout=120)

"""Environment test fixtures: runtimes to test, and a leak check around every test.

``runtime`` is parametrized over the runtimes the contract suite covers; add
a name to ``RUNTIMES`` and a branch in ``_make_runtime`` to bring another one
under the same suite.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from megaflow.environment.abstract import EnvironmentSpec, Runtime
from megaflow.environment.config import LocalRuntimeConfig
from megaflow.environment.local import LocalRuntime
from megaflow.environment.local.cgroups import GROUP
from megaflow.environment.local.records import process_key
from megaflow.environment.local.userns import STAGE_ROOT
from megaflow.environment.rootfs import build_busybox_rootfs

RUNTIMES = ["local", "local-rootfs", "container", "kubernetes"]
# The image each runtime's contract tests use; "rootfs" is the busybox root
# filesystem tarball (the container and kubernetes runtimes map "host" to their own
# image; kubernetes runs on Podman: tests/environment/kubernetes/podman_kubelet.py).
IMAGES = {"local": "host", "local-rootfs": "rootfs", "container": "host", "kubernetes": "host"}
CGROUP_ROOT = Path("/sys/fs/cgroup")


def _children() -> dict[int, tuple[int, str]]:
    """pid -> (ppid, command name) of every process."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        table[int(entry)] = (ppid, name)
    return table


def descendants(root: int) -> dict[int, str]:
    table = _children()
    found: dict[int, str] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, name) in table.items():
            if ppid == parent and pid not in found:
                found[pid] = name
                frontier.append(pid)
    return found


def our_cgroups() -> list[Path]:
    key = process_key()
    return [p for p in CGROUP_ROOT.glob(f"*/{GROUP}/{key}/*") if p.is_dir()]


def mounts(below: Path) -> set[str]:
    """Mount points under ``below`` (the machine's other mounts are not ours)."""
    with open("/proc/self/mountinfo") as f:
        return {p for p in (line.split()[4] for line in f) if p.startswith(str(below))}


@pytest.fixture(autouse=True)
def leak_check(tmp_path: Path) -> Iterator[None]:
    """No process, cgroup, mount (below the test's directory, or a runtime's
    staging mount) or sandbox directory may outlive a test."""
    stages = STAGE_ROOT / process_key()
    before_mounts = mounts(tmp_path) | mounts(stages)
    before_procs = set(descendants(os.getpid()))
    yield
    deadline = time.monotonic() + 5
    while True:
        procs = {
            pid: name
            for pid, name in descendants(os.getpid()).items()
            if pid not in before_procs and name in ("bwrap", "python3", "sh")
        }
        groups = our_cgroups()
        if (not procs and not groups) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not procs, f"processes leaked: {procs}"
    assert not groups, f"cgroups leaked: {groups}"
    assert (mounts(tmp_path) | mounts(stages)) - before_mounts == set(), "mounts leaked"
    boxes = list(tmp_path.glob("**/boxes/*"))
    assert not boxes, f"sandbox directories leaked: {boxes}"


@pytest.fixture(scope="session")
def rootfs_tar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A busybox root filesystem tarball (no python inside)."""
    return build_busybox_rootfs(tmp_path_factory.mktemp("rootfs") / "busybox.tar")


def local_runtime(tmp_path: Path, **kwargs: object) -> LocalRuntime:
    return LocalRuntime(LocalRuntimeConfig(root=str(tmp_path / "local"), **kwargs))  # type: ignore[arg-type]


async def _make_runtime(name: str, request: pytest.FixtureRequest, tmp_path: Path) -> Runtime:
    if name in ("local", "local-rootfs"):
        return local_runtime(tmp_path)
    if name == "container":
        from megaflow.environment.config import ContainerRuntimeConfig
        from megaflow.environment.container import ContainerRuntime

        svc = request.getfixturevalue("podman_service")
        ns = f"contract-{os.urandom(4).hex()}"  # list() sees only this test's sandboxes
        cfg = ContainerRuntimeConfig(base_url=svc.url, host_image=svc.image, namespace=ns)
        return ContainerRuntime(cfg)
    if name == "kubernetes":
        from megaflow.environment.config import KubernetesRuntimeConfig
        from megaflow.environment.kubernetes import KubernetesRuntime
        from tests.environment.kubernetes.podman_kubelet import ExecServer, PodmanCoreV1Api

        svc = request.getfixturevalue("podman_service")
        server = ExecServer(svc)
        request.addfinalizer(server.close)
        # root in the pod: the busybox image's /workspace is root's, and Podman fills a
        # pod's volume from it (non-root runs: tests/environment/kubernetes)
        kube = KubernetesRuntimeConfig(
            host_image=svc.image, image_pull_policy="Never", run_as_user=None,
            reap_interval_s=None, start_timeout_s=60,
        )  # fmt: skip
        return KubernetesRuntime(kube, api=PodmanCoreV1Api(svc, server, tmp_path))
    raise AssertionError(f"no test runtime named {name!r}")


@dataclass
class Target:
    """A started runtime under the contract suite, and specs in its image."""

    runtime: Runtime
    image: str

    def spec(self, **fields: Any) -> EnvironmentSpec:
        return EnvironmentSpec(image=self.image, **fields)


@pytest.fixture(params=RUNTIMES)
async def target(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Target]:
    """Each runtime the contract suite covers, started; stopped afterwards."""
    rt = await _make_runtime(request.param, request, tmp_path)
    await rt.start()
    try:
        image = IMAGES[request.param]
        if image == "rootfs":
            image = str(request.getfixturevalue("rootfs_tar"))
        yield Target(rt, image)
    finally:
        await rt.stop()


@pytest.fixture
async def local(tmp_path: Path) -> AsyncIterator[LocalRuntime]:
    rt = local_runtime(tmp_path)
    await rt.start()
    try:
        yield rt
    finally:
        await rt.stop()

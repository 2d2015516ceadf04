"""Podman as the sandbox benchmarks' peer: ``podman run`` on private storage, and
host memory per live container at a given count.

Both use cgroupfs with overlay storage in a folder of their own
(``--root``/``--runroot``), the busybox image imported once from the same root
filesystem the local side uses, and the network off, as a local sandbox's. The
OCI runtime is a parameter: ``runc`` (the default, what the container runtime's
service uses) or ``crun`` (written in C, where runc is Go), so the peer can be
measured on both; :func:`runtime_prefix` is what podman must run under for
crun to start containers on a host with a hybrid cgroup layout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

from report import claim
from sandbox_probes import meminfo

IMAGE = "megaflow-bench:rootfs"

OciRuntime = Literal["runc", "crun"]
"""The OCI runtimes podman is measured on."""
UNIFIED = "/sys/fs/cgroup/unified"
"""Where a hybrid cgroup layout (v1 controllers under a tmpfs) mounts cgroup2."""


def runtime_prefix(runtime: OciRuntime) -> list[str]:
    """The argv podman must run under for ``runtime`` to start containers here.

    Nothing, but for crun on a hybrid cgroup layout with a controller left to
    cgroup2 (``hugetlb``, when no v1 hierarchy took it): crun 1.8 refuses that
    layout ("cgroups in hybrid mode not supported"). It tells the layouts apart
    with ``statfs``, so in a mount namespace of the call's own, with an empty
    tmpfs over the cgroup2 mount, it sees the v1 layout and uses the v1
    controllers, as runc does. The namespace and its mount end with the call's
    processes; the host's mounts are not touched. It costs the crun side an
    ``unshare`` and a ``mount`` per podman call."""
    try:
        in_cgroup2 = Path(UNIFIED, "cgroup.controllers").read_text().split()
    except OSError:
        in_cgroup2 = []
    if runtime != "crun" or not in_cgroup2:
        return []
    mount = f'mount -t tmpfs none {UNIFIED} && exec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", mount, "sh"]


class Podman:
    """``podman`` on private storage, with ``runtime`` (runc or crun) and cgroupfs."""

    def __init__(self, base: Path, runtime: OciRuntime = "runc") -> None:
        self.base = base
        self.prefix = runtime_prefix(runtime)
        self.cli = [*self.prefix, "podman", "--root", f"{base}/root", "--runroot", f"{base}/run"]
        self.cli += ["--runtime", runtime, "--cgroup-manager", "cgroupfs"]
        self.cli += ["--events-backend", "file", "--storage-driver", "overlay"]
        claim(str(base))  # its conmons: detached, without our environment

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.cli, *args], capture_output=True, text=True, check=False)

    def close(self) -> None:
        self.run("rmi", "-a", "-f")
        with open("/proc/self/mountinfo") as f:
            points = [line.split()[4] for line in f if str(self.base) in line]
        for point in sorted(points, key=len, reverse=True):
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)
        shutil.rmtree(self.base, ignore_errors=True)


class PodmanPeer:
    """``podman run --rm`` of a command in the busybox image, on private storage,
    with ``runtime``. Nothing runs before the first :meth:`once`: the caller warms
    it up as it warms up the side it is compared with."""

    def __init__(self, rootfs: Path, runtime: OciRuntime = "runc") -> None:
        self.runtime = runtime
        self.pm = Podman(Path(tempfile.mkdtemp(prefix=f"mf-bench-podman-{runtime}-")), runtime)
        done = self.pm.run("import", "-q", str(rootfs), IMAGE)
        if done.returncode != 0:
            self.pm.close()
            raise RuntimeError(f"podman import failed: {done.stderr.strip()[:200]}")
        nofile = os.sysconf("SC_OPEN_MAX")
        self.limits = ["--ulimit", f"nofile={nofile}:{nofile}", "--ulimit", "nproc=32768:32768"]

    def once(self) -> float:
        """Seconds of one ``podman run --rm`` of ``true``, start to removal."""
        t0 = time.perf_counter()
        done = self.pm.run("run", "--rm", "--network", "none", *self.limits, IMAGE, "true")
        took = time.perf_counter() - t0
        if done.returncode != 0:
            raise RuntimeError(f"podman run ({self.runtime}) failed: {done.stderr.strip()[:200]}")
        return took


def _pss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def podman_density(
    rootfs: Path, n: int, batch: int = 8, runtime: OciRuntime = "runc"
) -> dict[str, float]:
    """Host memory per idle container at ``n`` live ones (``podman run -d`` of
    ``sleep``, ``batch`` CLI calls at a time): MiB per container of the drop of
    MemAvailable and of the kernel's Slab and PageTables, the PSS of each
    container's processes and of its conmon (podman has no daemon: conmon is its
    per-container supervisor), and the seconds to start them all, on ``runtime``."""
    peer = PodmanPeer(rootfs, runtime)
    pm, ids = peer.pm, []
    try:
        peer.once()  # the first run's one-off work (storage, image) outside the count
        time.sleep(0.5)
        before = meminfo()
        t0 = time.perf_counter()
        cmd = ["run", "-d", "--network", "none", *peer.limits, IMAGE, "sleep", "1000000"]
        with ThreadPoolExecutor(batch) as pool:
            for done in pool.map(lambda _: pm.run(*cmd), range(n)):
                if done.returncode != 0:
                    raise RuntimeError(f"podman run -d failed: {done.stderr.strip()[:200]}")
                ids.append(done.stdout.strip())
        took = time.perf_counter() - t0
        time.sleep(1)
        after = meminfo()
        fmt = "{{.State.Pid}} {{.State.ConmonPid}}"
        shown = pm.run("inspect", "--format", fmt, *ids).stdout.split("\n")
        pairs = [line.split() for line in shown if line.strip()]
        box = sum(_pss(int(p[0])) for p in pairs)
        conmon = sum(_pss(int(p[1])) for p in pairs)
        mib = 2**20 * n
        return {
            "MemAvailable": (before["MemAvailable"] - after["MemAvailable"]) / mib,
            "Slab": (after["Slab"] - before["Slab"]) / mib,
            "PageTables": (after["PageTables"] - before["PageTables"]) / mib,
            "KernelStack": (after["KernelStack"] - before["KernelStack"]) / mib,
            "container PSS": box / mib,
            "conmon PSS": conmon / mib,
            "seconds to start all": took,
            "live": float(len(pairs)),
        }
    finally:
        for i in range(0, len(ids), 64):
            pm.run("rm", "-f", "-t", "0", *ids[i : i + 64])
        pm.close()

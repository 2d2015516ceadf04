"""Start-up with per-instance images: cold load, cached and pre-loaded starts, against podman run.

Against a ``podman system service`` started for the run (runc, cgroupfs,
overlay storage), with one image per "instance" built in the run (busybox,
git, a small repository at /testbed and ``--pad-mb`` of incompressible data,
``tests/fixtures/images.py``), saved as archives and removed from the engine:

- image load from the archive folder alone, and a cold start (load, create
  through ready, exec ``true``, destroy) against the peer ``podman load -i`` +
  ``podman run --rm`` of the same image and command;
- a cached start (image in the engine) against ``podman run --rm``;
- a queue of tasks, each holding its sandbox ``--task-s``: how long each
  task's sandbox start waits, without loading ahead (``images.prefetch: 0``)
  and with it (``prefetch: 1``, the queue's images given to
  ``runtime.prefetch`` as the run is submitted).

``python benchmarks/bench_images.py`` (``--quick`` for a short run).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fixtures.images import archive_image, git, git_rootfs
from tests.fixtures.podman import PodmanService, running_podman_service

from ab import ratios, spread
from bench_container import row
from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.config import ContainerRuntimeConfig, ImageCacheConfig
from megaflow.environment.container import ContainerRuntime
from megaflow.environment.container.images import archive_name
from report import LOAD_AT_START, claim, report


def build(root: Path, svc: PodmanService, n: int, pad_mb: int) -> tuple[Path, list[str]]:
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "app.txt").write_text("value=1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    archives = root / "archives"
    names = [f"localhost/bench-inst-{i}:latest" for i in range(n)]
    for i, name in enumerate(names):
        (repo / "pad.bin").write_bytes(os.urandom(pad_mb << 20))  # distinct layers
        archive_image(svc, git_rootfs(root / f"{i}.tar", repo, name), name, archives)
        (root / f"{i}.tar").unlink()
    return archives, names


def runtime(svc: PodmanService, archives: Path, prefetch: int = 0) -> ContainerRuntime:
    images = ImageCacheConfig(archive_dir=str(archives), prefetch=prefetch)
    cfg = ContainerRuntimeConfig(base_url=svc.url, namespace="bimg", pull="never", images=images)
    return ContainerRuntime(cfg)


def podman(svc: PodmanService, *args: str) -> float:
    t0 = time.perf_counter()
    done = svc.podman(*args, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"podman {args[0]} failed: {done.stderr.strip()[:300]}")
    return time.perf_counter() - t0


async def one_shot(rt: ContainerRuntime, image: str) -> float:
    t0 = time.perf_counter()
    box = await rt.create(EnvironmentSpec(image=image))
    await box.exec("true")
    await box.destroy()
    return time.perf_counter() - t0


async def starts(svc: PodmanService, archives: Path, names: list[str]) -> list[list[str]]:
    rt = runtime(svc, archives)
    await rt.start()
    load: list[float] = []
    cold: list[float] = []
    peer_cold: list[float] = []
    cached: list[float] = []
    peer_cached: list[float] = []
    try:
        for name in names:  # interleaved, image by image: ours cold, peer cold, ours, peer
            cold.append(await one_shot(rt, name))
            load.append(rt.image_load_seconds[name])
            assert rt.engine.images is not None
            rt.engine.images.resolver.forget(name)
            podman(svc, "rmi", name)
            archive = archives / f"{archive_name(name)}.tar"
            t0 = time.perf_counter()
            podman(svc, "load", "-q", "-i", str(archive))
            podman(svc, "run", "--rm", "--network", "none", name, "true")
            peer_cold.append(time.perf_counter() - t0)
            cached.append(await one_shot(rt, name))
            peer_cached.append(podman(svc, "run", "--rm", "--network", "none", name, "true"))
            podman(svc, "rmi", name)
            rt.engine.images.resolver.forget(name)
    finally:
        await rt.stop()
    cold_pair, cached_pair = ratios(peer_cold, cold), ratios(peer_cached, cached)
    return [
        row("image load from the archive folder", load),
        row("cold start: load + create + exec + destroy", cold),
        row("peer: podman load -i + podman run --rm", peer_cold),
        ["peer / ours, cold, pair by pair", spread(cold_pair, "{:.2f}x".format), "",
         str(len(cold_pair))],
        row("cached start: create + exec + destroy", cached),
        row("peer: podman run --rm (image loaded)", peer_cached),
        ["peer / ours, cached, pair by pair", spread(cached_pair, "{:.2f}x".format), "",
         str(len(cached_pair))],
    ]  # fmt: skip


async def queue(
    svc: PodmanService, archives: Path, names: list[str], prefetch: int, task_s: float
) -> list[float]:
    """Each task's wait for its sandbox, tasks run one after another."""
    rt = runtime(svc, archives, prefetch)
    await rt.start()
    waits: list[float] = []
    try:
        await rt.prefetch([EnvironmentSpec(image=n) for n in names])
        for name in names:
            t0 = time.perf_counter()
            box = await rt.create(EnvironmentSpec(image=name))
            waits.append(time.perf_counter() - t0)
            await box.exec(f"sleep {task_s}")
            await box.destroy()
    finally:
        await rt.stop()
        for name in names:
            svc.podman("rmi", "--force", name)
    return waits


async def measure(
    svc: PodmanService, root: Path, n: int, pad_mb: int, task_s: float
) -> list[list[str]]:
    archives, names = build(root, svc, n, pad_mb)
    rows = await starts(svc, archives, names)
    plain = await queue(svc, archives, names, 0, task_s)
    ahead = await queue(svc, archives, names, 1, task_s)
    rows.append(row(f"queue, no loading ahead: start wait per task ({task_s:g} s tasks)", plain))
    rows.append(row("queue, loading the next image ahead: start wait per task", ahead))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a short run")
    ap.add_argument("-n", type=int, default=None, help="images (instances)")
    ap.add_argument("--pad-mb", type=int, default=32, help="incompressible MB per image")
    ap.add_argument("--task-s", type=float, default=2.0, help="how long each queued task runs")
    args = ap.parse_args()
    n = args.n or (3 if args.quick else 8)
    binary = shutil.which("podman")
    if binary is None:
        sys.exit("podman is not installed (apt-get install podman runc uidmap)")
    with (
        tempfile.TemporaryDirectory(prefix="mf-bench-img-") as tmp,
        running_podman_service(binary, driver="overlay") as svc,
    ):
        claim(str(svc.home))  # its conmons: detached, without our environment
        rows = asyncio.run(measure(svc, Path(tmp), n, args.pad_mb, args.task_s))
    notes = (
        f"Podman 4.3 service over a Unix socket, runc, cgroupfs, overlay storage; {n} images "
        f"of busybox + git + a repository with {args.pad_mb} MB of random bytes, each saved "
        "with `podman save` and removed before use. Ours goes through the Docker API "
        "(the runtime's image load of the archive, then create, exec, destroy); the peer "
        "through the podman CLI on the same storage, the same archive, image and command, "
        "interleaved image by image; ratios are the median (min-max) of the pairs. The queue "
        "rows run the same tasks in order, one at a time; with loading ahead the next "
        "image loads while the current task runs. No registry is reachable here: pulls "
        "(registry mirror) were not measured."
    )
    report(
        "images",
        "Per-instance images: cold, cached and pre-loaded starts vs podman",
        ["figure", "P50", "P99", "n"],
        rows,
        notes,
        load_before=LOAD_AT_START,
    )


if __name__ == "__main__":
    main()

"""Container runtime (Docker API on a private Podman service) latency, with podman run as peer.

Measures, against a ``podman system service`` started for the run (runc,
cgroupfs, private storage; the busybox root filesystem imported as image):

- the first load of a root-filesystem tarball image, timed apart;
- cold start (create through ready) at concurrency 1 and N;
- exec round trip of ``true``, reset, teardown;
- create + exec + destroy of one command, against the peer: ``podman run
  --rm`` of the same command on the same service storage, in the same run.

``python benchmarks/bench_container.py`` (``--quick`` for a short run).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fixtures.podman import PodmanService, running_podman_service

from ab import ratios, spread
from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.config import ContainerRuntimeConfig
from megaflow.environment.container import ContainerRuntime
from report import LOAD_AT_START, claim, report


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def row(name: str, values: list[float]) -> list[str]:
    ms = [v * 1000 for v in values]
    return [name, f"{pct(ms, 0.5):.1f} ms", f"{pct(ms, 0.99):.1f} ms", str(len(values))]


async def timed(fn: Callable[[], Awaitable[object]]) -> float:
    t0 = time.perf_counter()
    await fn()
    return time.perf_counter() - t0


async def measure(svc: PodmanService, n: int, conc: int, n_exec: int) -> list[list[str]]:
    rt = ContainerRuntime(ContainerRuntimeConfig(base_url=svc.url, namespace="bench"))
    await rt.start()
    rows: list[list[str]] = []
    spec = EnvironmentSpec(image=str(svc.rootfs))
    try:
        first = await rt.create(spec)
        load = rt.image_load_seconds[spec.image]
        rows.append(["first image load (rootfs tarball import)", f"{load * 1000:.1f} ms", "", "1"])
        await first.destroy()

        starts: list[float] = []
        teardowns: list[float] = []
        for _ in range(n):
            sb = await rt.create(spec)
            starts.append(sb.start_seconds)  # type: ignore[attr-defined]
            teardowns.append(await timed(sb.destroy))
        rows.append(row("cold start, concurrency 1", starts))

        t0 = time.perf_counter()
        boxes = await asyncio.gather(*(rt.create(spec) for _ in range(conc)))
        wall = time.perf_counter() - t0
        rows.append(row(f"cold start, concurrency {conc}", [b.start_seconds for b in boxes]))  # type: ignore[attr-defined]
        rows.append([f"{conc} starts, wall time", f"{wall * 1000:.1f} ms", "", str(conc)])
        await asyncio.gather(*(b.destroy() for b in boxes))

        sb = await rt.create(spec)
        execs = [await timed(lambda: sb.exec("true")) for _ in range(n_exec)]
        rows.append(row("exec round trip (`true`)", execs))
        resets = [await timed(sb.reset) for _ in range(max(3, n // 2))]
        rows.append(row("reset", resets))
        await sb.destroy()
        rows.append(row("teardown", teardowns))

        async def one_shot() -> None:
            box = await rt.create(spec)
            await box.exec("true")
            await box.destroy()

        ours: list[float] = []
        peer: list[float] = []

        def podman_run() -> float:
            t0 = time.perf_counter()
            done = svc.podman("run", "--rm", "--network", "none", svc.image, "true")
            if done.returncode != 0:
                raise RuntimeError(f"podman run failed: {done.stderr.strip()[:300]}")
            return time.perf_counter() - t0

        for i in range(max(3, n // 2)):  # interleaved, which side goes first alternating:
            if i % 2:  # what one run leaves the kernel to do falls on both sides alike
                peer.append(podman_run())
            ours.append(await timed(one_shot))
            if not i % 2:
                peer.append(podman_run())
        rows.append(row("container runtime: create + exec + destroy", ours))
    finally:
        await rt.stop()
    rows.append(row("peer: podman run --rm (same command, same storage)", peer))
    pair = ratios(peer, ours)
    rows.append(["podman run / ours, pair by pair", spread(pair, "{:.1f}x".format), "",
                 str(len(pair))])  # fmt: skip
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a short run")
    ap.add_argument("-n", type=int, default=None, help="sequential starts")
    ap.add_argument("--concurrency", type=int, default=None)
    args = ap.parse_args()
    n = args.n or (4 if args.quick else 12)
    conc = args.concurrency or (4 if args.quick else 8)
    n_exec = 20 if args.quick else 60
    binary = shutil.which("podman")
    if binary is None:
        sys.exit("podman is not installed (apt-get install podman runc uidmap)")
    with running_podman_service(binary, driver="overlay") as svc:
        claim(str(svc.home))  # its conmons: detached, without our environment
        rows = asyncio.run(measure(svc, n, conc, n_exec))
    notes = (
        "Podman 4.3 service over a Unix socket, runc, cgroupfs, overlay storage; busybox image. "
        "Cold start = create through ready, not counting the image load (with nothing to "
        "place in the workspace, its container takes the reset snapshot as it starts). "
        "The peer runs through the podman CLI on the same storage, the same image, command "
        "and lifecycle (create to removal), interleaved one for one with ours, which goes "
        "first alternating; the ratio is "
        "the median (min-max) of the pairs."
    )
    report(
        "container",
        "Container runtime (Docker API on Podman) vs podman run",
        ["figure", "P50", "P99", "n"],
        rows,
        notes,
        load_before=LOAD_AT_START,
    )


if __name__ == "__main__":
    main()

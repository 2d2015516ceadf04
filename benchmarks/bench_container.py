"""Container runtime (Docker API on a private Podman service) latency, with podman run as peer.

Measures, against a ``podman system service`` started for the run (runc,
cgroupfs, private storage; the busybox root filesystem imported as image):

- the first load of a root-filesystem tarball image, timed apart;
- cold start (create through ready) at concurrency 1 and N;
- exec round trip of ``true``, reset, teardown;

and, on that service and on a second one alike but on crun: create + exec +
destroy of one command through the Docker API (the container runtime),
against the peer: ``podman run --rm`` of the same command through the CLI on
the same service storage. The four sides (API and CLI on runc, then on crun)
are interleaved in alternating order (``ab.interleave_async``) after one
untimed run of each; each ratio is the CLI's over the API's on one runtime,
pair by pair.

``python benchmarks/bench_container.py`` (``--quick`` for a short run).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fixtures.podman import PodmanService, running_podman_service

from ab import interleave_async, order_text, ratios, spread
from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.config import ContainerRuntimeConfig
from megaflow.environment.container import ContainerRuntime
from podman_peer import UNIFIED, runtime_prefix
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
    finally:
        await rt.stop()
    return rows


def one_shot(rt: ContainerRuntime, spec: EnvironmentSpec) -> Callable[[], Awaitable[float]]:
    """Seconds of create + exec ``true`` + destroy through the Docker API."""

    async def run() -> float:
        t0 = time.perf_counter()
        box = await rt.create(spec)
        await box.exec("true")
        await box.destroy()
        return time.perf_counter() - t0

    return run


def podman_run(svc: PodmanService) -> Callable[[], Awaitable[float]]:
    """Seconds of ``podman run --rm`` of ``true`` through the CLI, on ``svc``'s storage."""

    async def run() -> float:
        t0 = time.perf_counter()
        done = svc.podman("run", "--rm", "--network", "none", svc.image, "true")
        if done.returncode != 0:
            raise RuntimeError(f"podman run failed: {done.stderr.strip()[:300]}")
        return time.perf_counter() - t0

    return run


async def like_for_like(services: dict[str, PodmanService], reps: int) -> list[list[str]]:
    """Per service (one per OCI runtime): create + exec + destroy through the
    container runtime, and ``podman run --rm`` of the same command through the
    CLI; every side interleaved in alternating order after one untimed run of
    each (the API side's first loads the image)."""
    rts = {
        name: ContainerRuntime(ContainerRuntimeConfig(base_url=svc.url, namespace="bench"))
        for name, svc in services.items()
    }
    sides: list[Callable[[], Awaitable[float]]] = []
    for name, svc in services.items():
        sides += [one_shot(rts[name], EnvironmentSpec(image=str(svc.rootfs))), podman_run(svc)]
    try:
        for rt in rts.values():
            await rt.start()
        got = await interleave_async(reps, sides, warmup=1)
    finally:
        for rt in rts.values():
            await rt.stop()
    rows: list[list[str]] = []
    for k, name in enumerate(services):
        ours, peer = got[2 * k], got[2 * k + 1]
        rows.append(row(f"container runtime ({name}): create + exec + destroy", ours))
        rows.append(row(f"peer: podman run --rm ({name}, same command, same storage)", peer))
        pair = ratios(peer, ours)
        rows.append([f"podman run / ours ({name}), pair by pair",
                     spread(pair, "{:.1f}x".format), "", str(len(pair))])  # fmt: skip
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
    with contextlib.ExitStack() as stack:
        svc = stack.enter_context(running_podman_service(binary, driver="overlay"))
        services = {"runc": svc}
        why_not_crun = ""
        if shutil.which("crun") is None:
            why_not_crun = "crun not installed"
        else:
            try:
                crun = running_podman_service(
                    binary, driver="overlay", runtime="crun", prefix=runtime_prefix("crun")
                )
                services["crun"] = stack.enter_context(crun)
            except RuntimeError as e:
                why_not_crun = str(e)[:300]
        for each in services.values():
            claim(str(each.home))  # its conmons: detached, without our environment
        rows = asyncio.run(measure(svc, n, conc, n_exec))
        rows += asyncio.run(like_for_like(services, max(3, n // 2)))
    if why_not_crun:
        rows.append(["podman on crun", why_not_crun, "", "0"])
    notes = (
        "Podman 4.3 service over a Unix socket, cgroupfs, overlay storage; busybox image. "
        "Rows without a runtime in their name are on runc. "
        "Cold start = create through ready, not counting the image load (with nothing to "
        "place in the workspace, its container takes the reset snapshot as it starts). "
        "Create + exec + destroy: a runc service and a crun service, each with its own "
        "storage; on each, ours through the Docker API and the peer through the podman CLI "
        "on the same storage, the same image, command and lifecycle (create to removal); "
        f"the {2 * len(services)} sides interleaved ({order_text(2 * len(services))}; "
        f"{', '.join(f'API then CLI on {name}' for name in services)}) after one untimed "
        "run of each; each ratio is the median (min-max) of the pairs on one runtime."
    )
    if runtime_prefix("crun"):
        notes += (
            " This host's cgroups are hybrid with a controller in cgroup2, which crun "
            "refuses, so the crun service and each of its CLI calls ran in a mount namespace "
            f"of its own with an empty tmpfs over {UNIFIED} (v1 controllers only), the CLI's "
            "unshare and mount counted in its time."
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

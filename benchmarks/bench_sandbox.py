"""Local sandbox start, acquire, exec and teardown latency, density, and podman as peer.

- cold start: ``LocalRuntime.create`` until the exec server answers (host
  image, no setup), one at a time and 16 at once;
- warm acquire: ``SandboxPool.acquire`` from a persistent pool with spares;
- exec round trip: ``sandbox.exec(["true"])``;
- teardown: ``sandbox.destroy()``;
- density: live persistent sandboxes (``--live N``) and host memory per
  sandbox (drop of MemAvailable, and the summed PSS of their processes);
- peer: ``podman run --rm`` (cgroupfs) of ``true`` in a busybox image
  imported from the same root filesystem, on runc and on crun, against local
  create + exec ``true`` + destroy of that image: the same image, command,
  warm-up and lifecycle (start to removal) on every side, the three
  interleaved in alternating order (``ab.interleave_async``), each runtime's
  ratio taken pair by pair against the local run of the same repetition. The
  cold-start rows (host image, create only) have no podman counterpart and
  are not compared with it. The density rows' podman containers run on runc.

Targets: cold start P99 <= 50 ms, warm acquire P99 <= 5 ms, exec P50 <= 3 ms,
>= 1,000 live sandboxes at <= 10 MiB each, start to removal >= 5x faster than podman run.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sandbox_probes
from ab import interleave_async, order_text, ratios
from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.config import LocalRuntimeConfig, PoolConfig
from megaflow.environment.local import LocalRuntime, LocalSandbox
from megaflow.environment.pool import SandboxPool
from megaflow.environment.rootfs import build_busybox_rootfs
from podman_peer import UNIFIED, OciRuntime, PodmanPeer, podman_density, runtime_prefix
from report import LOAD_AT_START, SAMPLER, add_rule_args, begin, report

HOST = EnvironmentSpec()
RUNTIMES: tuple[OciRuntime, ...] = ("runc", "crun")
"""The OCI runtimes the podman peer runs on, in the order the sides are interleaved."""


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def ms(x: float) -> str:
    return f"{x * 1000:.1f} ms"


async def timed(fn: Callable[[], Awaitable[object]]) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = await fn()
    return time.perf_counter() - t0, out


async def cold_starts(
    rt: LocalRuntime, n: int, conc: int
) -> tuple[list[float], list[float], list[float]]:
    """Start latencies, teardown latencies, and CPU seconds each start used
    inside the sandbox (bubblewrap and the exec server, from its cgroup)."""
    starts: list[float] = []
    downs: list[float] = []
    cpu: list[float] = []
    for _ in range(max(1, n // conc)):
        batch = await asyncio.gather(*(timed(lambda: rt.create(HOST)) for _ in range(conc)))
        starts += [t for t, _ in batch]
        for _, sb in batch:
            assert isinstance(sb, LocalSandbox)
            cpu.append((await sb.stats()).cpu_seconds)
            t, _ = await timed(sb.destroy)
            downs.append(t)
    return starts, downs, cpu


async def warm_acquires(rt: LocalRuntime, n: int) -> list[float]:
    cfg = PoolConfig(min=4, max=4, warm_share=1.0)
    out = []
    async with SandboxPool(rt, "persistent", cfg) as pool:
        await pool.prewarm(HOST)
        for i in range(n):
            t, sb = await timed(lambda i=i: pool.acquire(HOST, owner=f"t{i}"))
            out.append(t)
            await pool.release(sb)  # type: ignore[arg-type]
    return out


async def exec_trips(rt: LocalRuntime, n: int) -> list[float]:
    async with await rt.create(HOST) as sb:
        for _ in range(10):
            await sb.exec(["true"])
        return [(await timed(lambda: sb.exec(["true"])))[0] for _ in range(n)]


def mem_available() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def pss_of(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


BUSY = ["sh", "-c", "while :; do :; done"]  # one spinning shell per sandbox


async def density(
    rt: LocalRuntime, live: int, spec: EnvironmentSpec
) -> dict[str, dict[str, float]]:
    """Start ``live`` persistent sandboxes and ask each for ``true``: how many
    answered, the seconds to start them all, and per sandbox the host memory
    (MemAvailable's drop, the kernel's Slab, PageTables and KernelStack, the
    sandboxes' groups, PSS), and the control plane's (this process's) RSS;
    ``idle`` so, then ``busy``: the same with a shell spinning in each."""
    before, rss0 = sandbox_probes.meminfo(), sandbox_probes.rss_self()
    boxes: list[LocalSandbox] = []
    t0 = time.perf_counter()

    def figures() -> dict[str, float]:
        n = len(boxes)
        out = sandbox_probes.per_box(before, sandbox_probes.meminfo(), n)
        pids = [p for sb in boxes if sb.cgroup for p in sb.cgroup.pids_in()]
        rss = sandbox_probes.rss_self()
        out.update({
            "seconds": took, "PSS": pss_of(pids) / n / 2**20,
            "cgroup memory": sandbox_probes.cgroup_memory(boxes) / n / 2**20,
            "RSS": rss / 2**20, "RSS growth": (rss - rss0) / n / 2**20,
        })  # fmt: skip
        return out

    jobs: list[asyncio.Future[object]] = []
    try:
        while len(boxes) < live:
            batch = min(16, live - len(boxes))
            boxes += await asyncio.gather(*(rt.create(spec) for _ in range(batch)))
        took = time.perf_counter() - t0
        await asyncio.sleep(1)
        results = await asyncio.gather(*(sb.exec(["true"]) for sb in boxes))
        idle = {**figures(), "answering": sum(r.ok for r in results)}
        idle_pids = [len(sb.cgroup.pids_in()) if sb.cgroup else 0 for sb in boxes]
        jobs = [asyncio.ensure_future(sb.exec(BUSY, timeout=600)) for sb in boxes]
        await asyncio.sleep(5)
        busy = figures()
        now = [len(sb.cgroup.pids_in()) if sb.cgroup else 0 for sb in boxes]
        busy["running"] = sum(1 for a, b in zip(idle_pids, now, strict=True) if b > a)
        return {"idle": idle, "busy": busy}
    finally:
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)
        for i in range(0, len(boxes), 64):
            await asyncio.gather(*(sb.destroy() for sb in boxes[i : i + 64]))


def kernel(figures: dict[str, float]) -> float:
    """MiB per sandbox (or container) of the kernel's own: Slab, PageTables, KernelStack."""
    return figures["Slab"] + figures["PageTables"] + figures["KernelStack"]


async def local_once(rt: LocalRuntime, spec: EnvironmentSpec) -> float:
    t0 = time.perf_counter()
    sb = await rt.create(spec)
    assert (await sb.exec(["true"])).ok
    await sb.destroy()
    return time.perf_counter() - t0


async def same_command(
    rt: LocalRuntime, rootfs: Path, n: int
) -> tuple[list[float], dict[OciRuntime, list[float] | str]]:
    """Local create + exec ``true`` + destroy, and ``podman run --rm`` of ``true`` on
    each of ``RUNTIMES``, all on the busybox image: ``n`` repetitions interleaved
    in alternating order (local, runc, crun, then crun, runc, local, ...: what one
    side leaves the kernel to do falls on every side alike), after one untimed
    run of each in the same order (the local one unpacks the image). Per runtime
    its times, or why it has none (a runtime that fails stops being run)."""
    spec = EnvironmentSpec(image=str(rootfs))
    peers: list[PodmanPeer] = []
    why: dict[OciRuntime, str] = {}
    for runtime in RUNTIMES:
        missing = [p for p in ("podman", runtime) if shutil.which(p) is None]
        if missing:
            why[runtime] = f"{' and '.join(missing)} not installed"
            continue
        try:
            peers.append(PodmanPeer(rootfs, runtime))
        except RuntimeError as e:
            why[runtime] = str(e)

    def podman_side(peer: PodmanPeer) -> Callable[[], Awaitable[float]]:
        async def run() -> float:
            if peer.runtime in why:
                return math.nan
            try:
                return peer.once()
            except RuntimeError as e:
                why[peer.runtime] = str(e)
                return math.nan

        return run

    sides = [lambda: local_once(rt, spec), *(podman_side(peer) for peer in peers)]
    try:
        local, *runs = await interleave_async(n, sides, warmup=1)
    finally:
        for peer in peers:
            peer.pm.close()
    times = {peer.runtime: got for peer, got in zip(peers, runs, strict=True)}
    return local, {r: why.get(r) or times[r] for r in RUNTIMES}


def wrapped_note(runtimes: tuple[OciRuntime, ...]) -> str:
    """A sentence for the notes on the runtimes podman ran under a prefix here."""
    wrapped = [r for r in runtimes if runtime_prefix(r)]
    if not wrapped:
        return ""
    return (
        " This host's cgroups are hybrid with a controller in cgroup2, which "
        f"{' and '.join(wrapped)} refuses, so each of its podman calls ran in a mount "
        f"namespace of its own with an empty tmpfs over {UNIFIED} (v1 controllers only), "
        "the unshare and mount counted in its time."
    )


def podman_dense(rootfs: Path, live: int) -> dict[str, float] | str:
    """Podman's host memory per idle container at ``live``, or why it was not measured."""
    if shutil.which("podman") is None:
        return "podman not installed"
    try:
        return podman_density(rootfs, live)
    except RuntimeError as e:
        return str(e)


async def main(args: argparse.Namespace) -> None:
    if args.mode != "table":
        await sandbox_probes.run_mode(args.mode, args.n, args.image)
        return
    begin(args)  # a dirty tree not allowed: refused before the run
    q = args.quick
    n_cold, n_warm, n_exec, n_peer = (12, 50, 100, 3) if q else (60, 300, 500, 10)
    live = args.live or (20 if q else 1024)
    work = Path(tempfile.mkdtemp(prefix="mf-bench-sandbox-"))
    rootfs = build_busybox_rootfs(work / "busybox.tar")
    rt = LocalRuntime(LocalRuntimeConfig(root=str(work / "local")))
    await rt.start()
    try:
        cold1, down, cpu = await cold_starts(rt, n_cold, 1)
        cold16, _, _ = await cold_starts(rt, max(16, n_cold), 16)
        warm = await warm_acquires(rt, n_warm)
        trips = await exec_trips(rt, n_exec)
        local_same, peers = await same_command(rt, rootfs, n_peer)  # unpacks the image
        SAMPLER.own_load(f"density rows ({live:,} live sandboxes, then as many podman containers)")
        dense_local = await density(rt, live, EnvironmentSpec(image=str(rootfs)))
    finally:
        await rt.stop()
    dense = podman_dense(rootfs, live)
    shutil.rmtree(work, ignore_errors=True)

    def row(name: str, vals: list[float], target: str) -> list[str]:
        return [name, ms(pct(vals, 50)), ms(pct(vals, 99)), target, str(len(vals))]

    rows = [
        row("local cold start, concurrency 1", cold1, "P99 <= 50 ms"),
        row("local cold start, concurrency 16", cold16, "-"),
        row("CPU time one start uses in the sandbox", cpu, "-"),
        row("warm-pool acquire (persistent)", warm, "P99 <= 5 ms"),
        row("exec round trip (`true`)", trips, "P50 <= 3 ms"),
        row("teardown", down, "-"),
        row("local create+exec+destroy, busybox image", local_same, "-"),
    ]
    for runtime, runs in peers.items():
        if isinstance(runs, list):
            rows.append(row(f"peer: podman run --rm `true` ({runtime}), busybox image", runs, "-"))
            pair = ratios(runs, local_same)
            ratio = f"{statistics.median(pair):.1f}x"
            rng = f"{min(pair):.1f}-{max(pair):.1f}x over {len(pair)} pairs"
        else:
            rows.append([f"peer: podman run --rm ({runtime})", runs, "-", "-", "0"])
            ratio, rng = "n/a", ""
        name = f"podman ({runtime}) / local, same command, pair by pair"
        rows.append([name, ratio, rng, ">= 5x", ""])
    d, b = dense_local["idle"], dense_local["busy"]
    rows += [
        [f"live persistent sandboxes (asked {live:,})", f"{d['answering']:.0f} answering",
         f"started in {d['seconds']:.1f} s", ">= 1,000", ""],
        ["host memory per idle sandbox", f"{d['MemAvailable']:.2f} MiB (MemAvailable drop)",
         f"{d['PSS']:.2f} MiB (PSS)", "<= 8 MiB", ""],
        ["  of it the kernel's (Slab + PageTables + KernelStack)", f"{kernel(d):.2f} MiB",
         f"cgroup memory {d['cgroup memory']:.2f} MiB", "-", ""],
        [f"control plane RSS at {live:,} live", f"{d['RSS']:.0f} MiB",
         f"+{d['RSS growth'] * 1024:.0f} KiB per sandbox", "-", ""],
        [f"host memory per busy sandbox ({b['running']:.0f} running a spinning shell)",
         f"{b['MemAvailable']:.2f} MiB (MemAvailable drop)", f"{b['PSS']:.2f} MiB (PSS)",
         "-", ""],
        ["  of it the kernel's (Slab + PageTables + KernelStack)", f"{kernel(b):.2f} MiB",
         f"cgroup memory {b['cgroup memory']:.2f} MiB", "-", ""],
        [f"control plane RSS at {live:,} busy", f"{b['RSS']:.0f} MiB",
         f"+{b['RSS growth'] * 1024:.0f} KiB per sandbox", "-", ""],
    ]  # fmt: skip
    if isinstance(dense, dict):
        rows += [
            [f"peer: host memory per idle podman container (runc, {dense['live']:,.0f} live)",
             f"{dense['MemAvailable']:.2f} MiB (MemAvailable drop)",
             f"{dense['container PSS'] + dense['conmon PSS']:.2f} MiB (PSS, conmon "
             f"{dense['conmon PSS']:.2f})", "-", ""],
            ["  of it the kernel's (Slab + PageTables + KernelStack)",
             f"{kernel(dense):.2f} MiB", f"started in {dense['seconds to start all']:.1f} s",
             "-", ""],
        ]  # fmt: skip
    else:
        rows.append(["peer: host memory per podman container", dense, "-", "-", ""])
    notes = (
        "P50/P99 columns hold the figure for the rows without percentiles. "
        f"Density: {live:,} live sandboxes (`--live`), started 16 at a time after every "
        "other row, so the load they raise does not mark those rows; idle, then each "
        "running a spinning shell (`sh -c 'while :; do :; done'`) for 5 s, measured "
        "against the same MemAvailable before the starts. "
        "The podman comparison is like for like: the same busybox image and command, start "
        "to removal on every side (podman: one CLI process per run, cgroupfs, private "
        "overlay storage with the image imported once, on runc and on crun, each row naming "
        "its runtime; local: the runtime started once), interleaved in alternating order "
        f"({order_text(1 + len(RUNTIMES))}; A local, then "
        f"{', '.join(RUNTIMES)}) for {len(local_same)} repetitions after one untimed run of "
        "each in the same order; each runtime's ratio is taken against the local run of the "
        f"same repetition.{wrapped_note(RUNTIMES)} Cold-start rows are create-only on the host "
        "image and have "
        "no podman counterpart. Host memory: the same count of idle live sandboxes and "
        "`podman run -d` containers of `sleep` (runc) on the busybox image, one side after the "
        "other (local first), each measured against MemAvailable just before its own starts; "
        "PSS sums each side's processes (local: bubblewrap and the exec server; podman: "
        "the container's process and its conmon)."
    )
    cols = ["figure", "P50", "P99", "target", "n"]
    title = "Local sandboxes (bubblewrap) vs podman run"
    report("sandbox", title, cols, rows, notes, load_before=LOAD_AT_START, args=args)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short run for a smoke test")
    parser.add_argument("--live", type=int, default=0, help="live sandboxes to reach")
    parser.add_argument(
        "--mode", default="table",
        choices=["table", "mounts", "cgroups", "cold", "exec", "density"],
        help="table: the latency table; mounts: mount-family syscalls per start (strace -c -f); "
        "cgroups: memory cgroups left in the kernel after --n starts; cold: cold-start P50/P99 "
        "and CPU per start at concurrency 1 and 16 (--n starts each); exec: CPU per `exec true`; "
        "density: host memory "
        "per idle and busy sandbox at --n live",
    )  # fmt: skip
    parser.add_argument(
        "--n", type=int, default=0,
        help="sandboxes (execs) for --mode: default 20 mounts, 256 cgroups, 48 cold, 300 exec, "
        "1,024 density",
    )  # fmt: skip
    parser.add_argument("--image", choices=["host", "busybox"], default="host")
    add_rule_args(parser)
    parsed = parser.parse_args()
    if parsed.n < 0:
        parser.error("--n must be positive")
    defaults = {"mounts": 20, "cgroups": 256, "cold": 48, "exec": 300, "density": 1024}
    parsed.n = parsed.n or defaults.get(parsed.mode, 0)
    asyncio.run(main(parsed))

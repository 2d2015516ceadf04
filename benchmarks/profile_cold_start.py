"""Where a local sandbox's cold start goes: ``LocalRuntime.create`` at concurrency 1, by phase.

``bench_sandbox.py`` gives the cold start's P50/P99; this script splits it.
Each phase is a function of the start path, timed by wrapping it in this
process only (a measuring device, not a mode of MegaFlow):

- ``make_dirs``, ``fill + cgroups``: the sandbox's folders and record, then
  its workspace and cgroups (worker threads);
- ``popen``: ``subprocess.Popen`` of the cgroup-joining shell that execs
  ``setpriv`` and bubblewrap (a worker thread; it returns once the shell runs);
- ``info fd``: until bubblewrap has made its namespaces and says its child's pid;
- ``maps + release``: writing the user namespace's maps and letting it go on;
- ``hello``: bubblewrap's mounts, then ``python3`` starting in the sandbox,
  loading the exec server and answering its first frame;
- ``total``: the whole ``create``.

Then, outside any sandbox and alternated with ``/bin/true``, how long the
sandbox's ``python3 -I -S`` takes from spawn to exit doing nothing (its own
boot): what a native exec server would not pay. The host image, ``--n``
starts after 5 untimed ones; one table on stdout, nothing written.

``--burst 0,4`` instead starts 16 sandboxes at once, ``--n`` times, on one
runtime per ``max_starting`` value (0: the default), the runtimes taking
turns in alternating order after one untimed burst each: each start's wall
time and the burst's last, by value.

::

    python benchmarks/profile_cold_start.py --n 200
    python benchmarks/profile_cold_start.py --burst 0,2,4,8 --n 10
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report
from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.config import LocalRuntimeConfig
from megaflow.environment.local import LocalRuntime, LocalSandbox, channel, launcher, process, spawn
from megaflow.environment.local import runtime as runtime_module
from megaflow.environment.local.staging import Staging
from sandbox_probes import pct

TIMES: dict[str, list[float]] = defaultdict(list)


def _timed_sync(fn: Callable[..., Any], label: str) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            TIMES[label].append(time.perf_counter() - t0)

    return run


def _timed_async(fn: Callable[..., Any], label: str) -> Callable[..., Any]:
    async def run(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await fn(*args, **kwargs)
        finally:
            TIMES[label].append(time.perf_counter() - t0)

    return run


def instrument() -> None:
    local = runtime_module.LocalRuntime
    local._make_dirs = staticmethod(_timed_sync(local._make_dirs, "make_dirs"))  # type: ignore[method-assign]
    local._fill = _timed_sync(local._fill, "fill + cgroups")  # type: ignore[method-assign]
    Staging.view = _timed_sync(Staging.view, "staging view")  # type: ignore[method-assign]
    process._popen_bwrap = _timed_sync(process._popen_bwrap, "popen")
    spawn._read_all = _timed_async(spawn._read_all, "info fd")
    spawn._off_loop = _timed_async(spawn._off_loop, "maps + release")
    channel.Channel.wait_ready = _timed_async(channel.Channel.wait_ready, "hello")  # type: ignore[method-assign]


async def starts(n: int) -> list[float]:
    work = Path(tempfile.mkdtemp(prefix="mf-profile-cold-"))
    rt = LocalRuntime(LocalRuntimeConfig(root=str(work / "local")))
    await rt.start()
    spec = EnvironmentSpec(image="host")
    total: list[float] = []
    try:
        for i in range(n + 5):
            t0 = time.perf_counter()
            sb = await rt.create(spec)
            took = time.perf_counter() - t0
            await sb.destroy()
            if i == 4:
                TIMES.clear()  # the untimed starts
            elif i > 4:
                total.append(took)
    finally:
        await rt.stop()
    return total


def boots(n: int) -> tuple[list[float], list[float]]:
    """Spawn-to-exit of the sandbox's python doing nothing, and of /bin/true, alternated."""
    python = [str(launcher.HOST_PYTHON), "-I", "-S", "-c", "pass"]
    sides: dict[str, list[float]] = {"python": [], "true": []}
    order = [("python", python), ("true", ["/bin/true"])]
    for i in range(n + 1):
        for name, argv in order if i % 2 else order[::-1]:
            t0 = time.perf_counter()
            subprocess.run(argv, check=True)
            if i:
                sides[name].append(time.perf_counter() - t0)
    return sides["python"], sides["true"]


async def _burst(rt: LocalRuntime, spec: EnvironmentSpec, size: int) -> list[float]:
    t0 = time.perf_counter()

    async def one() -> tuple[float, LocalSandbox]:
        sb = await rt.create(spec)
        return time.perf_counter() - t0, sb

    done = await asyncio.gather(*(one() for _ in range(size)))
    for _, sb in done:
        await sb.destroy()
    return [t for t, _ in done]


async def bursts(limits: list[int], n: int, size: int = 16) -> None:
    spec = EnvironmentSpec(image="host")
    runtimes = {}
    for m in limits:
        root = Path(tempfile.mkdtemp(prefix=f"mf-profile-burst-{m}-")) / "local"
        runtimes[m] = LocalRuntime(LocalRuntimeConfig(root=str(root), max_starting=m))
        await runtimes[m].start()
        await _burst(runtimes[m], spec, size)  # untimed
    starts: dict[int, list[float]] = {m: [] for m in limits}
    last: dict[int, list[float]] = {m: [] for m in limits}
    try:
        for i in range(n):
            for m in limits if i % 2 == 0 else limits[::-1]:
                times = await _burst(runtimes[m], spec, size)
                starts[m] += times
                last[m].append(max(times))
    finally:
        for rt in runtimes.values():
            await rt.stop()
    head = f"max_starting ({n} bursts of {size})"
    print(f"| {head} | start P50 ms | start P99 ms | last of the burst, median ms |")
    print("|---|---|---|---|")
    for m in limits:
        cells = f"{pct(starts[m], 50) * 1e3:.1f} | {pct(starts[m], 99) * 1e3:.1f}"
        print(f"| {m or 'default'} | {cells} | {statistics.median(last[m]) * 1e3:.1f} |")


def main() -> None:
    report.SAMPLER.stop()  # nothing is written: no load sampling in this process
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--n", type=int, default=200, help="timed starts (and boots), or bursts")
    ap.add_argument("--burst", help="max_starting values, comma-separated: bursts of 16 instead")
    args = ap.parse_args()
    if args.burst:
        asyncio.run(bursts([int(v) for v in args.burst.split(",")], args.n))
        return
    instrument()
    total = asyncio.run(starts(args.n))
    python, true = boots(args.n)
    print(f"| phase of `create` ({args.n} starts, concurrency 1) | P50 ms | P90 ms | P99 ms |")
    print("|---|---|---|---|")
    for label, values in [*TIMES.items(), ("total", total)]:
        cells = " | ".join(f"{pct(values, q) * 1e3:.2f}" for q in (50, 90, 99))
        print(f"| {label} | {cells} |")
    gap = [p - t for p, t in zip(python, true, strict=True)]
    print(f"\npython3 -I -S -c pass, spawn to exit: P50 {statistics.median(python) * 1e3:.2f} ms; "
          f"/bin/true {statistics.median(true) * 1e3:.2f} ms; the interpreter's own boot, "
          f"pair by pair: P50 {statistics.median(gap) * 1e3:.2f} ms")  # fmt: skip


if __name__ == "__main__":
    main()

"""Probes of what one local sandbox costs the kernel, for ``bench_sandbox.py``'s modes.

- mount calls per start: ``strace -c -f`` attached to this process while it
  starts sandboxes (bubblewrap and everything else it forks are followed);
  the runtime is started and one sandbox made first, so one-time work (the
  staging binds, an image's prepared view) is outside the count;
- lingering memory cgroups: removed memory cgroups the kernel still holds
  (``/proc/cgroups`` counts them with the live ones on v1,
  ``nr_dying_descendants`` of the root on v2) before and after N starts;
- cold starts at concurrency 1 and 16: wall P50/P99 and CPU per start;
- ``exec true``: CPU per command, in the sandbox and in the control plane;
- density: host memory per sandbox, idle and busy, including the kernel's
  (``Slab`` and ``PageTables`` of ``/proc/meminfo``, the sandboxes' cgroup
  memory) and this process's RSS.
"""

from __future__ import annotations

import asyncio
import os
import resource
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.config import LocalRuntimeConfig
from megaflow.environment.local import LocalRuntime, LocalSandbox
from megaflow.environment.rootfs import build_busybox_rootfs

MOUNT_CALLS = (
    "mount", "umount2", "pivot_root", "mount_setattr", "open_tree", "move_mount",
    "fsopen", "fsconfig", "fsmount",
)  # fmt: skip


def strace_counts(text: str) -> dict[str, int]:
    """syscall -> calls, from the table ``strace -c`` writes."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[-1] in MOUNT_CALLS and parts[3].isdigit():
            out[parts[-1]] = int(parts[3])
    return out


async def mount_calls(rt: LocalRuntime, spec: EnvironmentSpec, n: int) -> dict[str, int]:
    """Mount-family syscalls made while ``n`` sandboxes of ``spec`` start (not
    their teardown): attach ``strace -c -f`` to this process, start them, detach."""
    async with await rt.create(spec):  # one-time work outside the count
        pass
    out = Path(tempfile.mkstemp(prefix="mf-strace-")[1])
    tracer = subprocess.Popen(
        ["strace", "-c", "-f", "-e", "trace=" + ",".join(MOUNT_CALLS), "-o", str(out),
         "-p", str(os.getpid())],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert tracer.stderr is not None
        line = await asyncio.to_thread(tracer.stderr.readline)  # "Process N attached"
        if "attached" not in line:
            raise RuntimeError(f"strace could not attach: {line.strip()}")
        boxes = [await rt.create(spec) for _ in range(n)]
    finally:
        tracer.send_signal(signal.SIGINT)
        await asyncio.to_thread(tracer.wait, 30)
    for sb in boxes:
        await sb.destroy()
    counts = strace_counts(out.read_text())
    out.unlink()
    return counts


def memory_cgroups() -> int:
    """Memory cgroups the kernel holds, live and removed-but-not-freed (v1), or
    the removed ones alone (v2: ``nr_dying_descendants``)."""
    stat = Path("/sys/fs/cgroup/cgroup.stat")
    if stat.exists():
        for line in stat.read_text().splitlines():
            if line.startswith("nr_dying_descendants "):
                return int(line.split()[1])
    for line in Path("/proc/cgroups").read_text().splitlines():
        parts = line.split()
        if parts and parts[0] == "memory":
            return int(parts[2])
    return 0


def left_charged(rt: LocalRuntime) -> int:
    """Bytes still charged below this runtime's memory group once every sandbox
    group in it is removed: what keeps removed groups alive in the kernel (the
    parent's usage counts its removed children's charges; it runs nothing)."""
    assert rt.layout is not None
    owner = rt.layout.base("memory") / rt.process
    for name in ("memory.usage_in_bytes", "memory.current"):
        if (owner / name).exists():
            return int((owner / name).read_text())
    return 0


async def lingering(
    rt: LocalRuntime, spec: EnvironmentSpec, n: int, conc: int
) -> tuple[int, int, int]:
    """(memory cgroups the kernel holds before, after, bytes left charged to this
    runtime's removed groups) for ``n`` sandboxes of ``spec`` started, given a
    command that reads and writes files, and destroyed, ``conc`` at a time. The
    machine-wide count moves with other work too; the charge left is ours alone."""
    before = memory_cgroups()
    work = "ls -R /usr/lib >/dev/null; head -c 1000000 /dev/urandom > /tmp/f; cat /tmp/f >/dev/null"
    for _ in range(0, n, conc):
        boxes = await asyncio.gather(*(rt.create(spec) for _ in range(conc)))
        await asyncio.gather(*(sb.exec(["sh", "-c", work]) for sb in boxes))
        await asyncio.gather(*(sb.destroy() for sb in boxes))
    await asyncio.sleep(1)  # the kernel frees removed groups in a worker
    return before, memory_cgroups(), left_charged(rt)


def meminfo() -> dict[str, int]:
    out = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, _, rest = line.partition(":")
        out[key] = int(rest.split()[0]) * 1024
    return out


def rss_self() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def cgroup_memory(boxes: list[LocalSandbox]) -> int:
    total = 0
    for sb in boxes:
        if sb.cgroup is not None:
            total += sb.cgroup.stats().memory_bytes
    return total


MEM_KEYS = ("MemAvailable", "Slab", "PageTables", "KernelStack")


def per_box(before: dict[str, int], after: dict[str, int], n: int) -> dict[str, float]:
    """MiB per sandbox of each /proc/meminfo figure (MemAvailable: its drop)."""
    sign = {"MemAvailable": -1}
    return {k: sign.get(k, 1) * (after[k] - before[k]) / n / 2**20 for k in MEM_KEYS}


async def density(
    rt: LocalRuntime, spec: EnvironmentSpec, n: int, batch: int = 16
) -> dict[str, dict[str, float]]:
    """Host memory per sandbox at ``n`` live sandboxes, idle and then each running
    a busy command (a shell loop); MiB per sandbox by figure, and the control
    plane's (this process's) RSS in MiB."""
    async with await rt.create(spec):  # one-time work outside the figures
        pass
    await asyncio.sleep(0.5)
    before, rss0 = meminfo(), rss_self()
    boxes: list[LocalSandbox] = []
    out: dict[str, dict[str, float]] = {}
    t0 = time.perf_counter()
    try:
        while len(boxes) < n:
            size = min(batch, n - len(boxes))
            boxes += await asyncio.gather(*(rt.create(spec) for _ in range(size)))
        took = time.perf_counter() - t0
        await asyncio.sleep(1)
        idle = per_box(before, meminfo(), n)
        idle["cgroup memory.current"] = cgroup_memory(boxes) / n / 2**20
        idle["control plane RSS (total)"] = rss_self() / 2**20
        idle["control plane RSS growth"] = (rss_self() - rss0) / n / 2**20
        idle["seconds to start all"] = took
        out["idle"] = idle
        busy_cmd = ["sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"]
        jobs = [asyncio.ensure_future(sb.exec(busy_cmd, timeout=600)) for sb in boxes]
        await asyncio.sleep(2)
        busy = per_box(before, meminfo(), n)
        busy["cgroup memory.current"] = cgroup_memory(boxes) / n / 2**20
        busy["control plane RSS (total)"] = rss_self() / 2**20
        busy["control plane RSS growth"] = (rss_self() - rss0) / n / 2**20
        busy["seconds to start all"] = took
        out["busy"] = busy
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)
    finally:
        for i in range(0, len(boxes), 64):
            await asyncio.gather(*(sb.destroy() for sb in boxes[i : i + 64]))
    return out


def _cpu_now() -> float:
    """CPU seconds of this process and its reaped children (getrusage)."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


async def cold(rt: LocalRuntime, spec: EnvironmentSpec, n: int, conc: int) -> dict[str, float]:
    """Cold starts ``conc`` at a time (``n`` in all): P50 and P99 of the wall
    time in ms, and CPU ms per start: the control plane's (getrusage of this
    process and its threads) and the sandbox's (its cgroup), which
    the machine's load shapes less than wall time."""
    async with await rt.create(spec):  # one-time work outside the figures
        pass
    walls: list[float] = []
    host_cpu = box_cpu = 0.0
    for _ in range(max(1, n // conc)):
        cpu0 = _cpu_now()

        async def one() -> tuple[float, LocalSandbox]:
            t0 = time.perf_counter()
            sb = await rt.create(spec)
            return time.perf_counter() - t0, sb

        batch = await asyncio.gather(*(one() for _ in range(conc)))
        host_cpu += _cpu_now() - cpu0
        walls += [t for t, _ in batch]
        for _, sb in batch:
            box_cpu += (await sb.stats()).cpu_seconds
            await sb.destroy()
    k = len(walls)
    return {
        "P50 ms": pct(walls, 50) * 1e3, "P99 ms": pct(walls, 99) * 1e3,
        "control-plane CPU ms/start": host_cpu / k * 1e3,
        "sandbox CPU ms/start": box_cpu / k * 1e3, "n": k,
    }  # fmt: skip


async def exec_cost(rt: LocalRuntime, spec: EnvironmentSpec, n: int) -> dict[str, float]:
    """CPU ms per ``exec true`` in one sandbox: the sandbox's (its cgroup: the
    exec server's fork and the command) and the control plane's (getrusage),
    with the wall P50 in ms."""
    async with await rt.create(spec) as sb:
        for _ in range(10):
            await sb.exec(["true"])
        box0, host0 = (await sb.stats()).cpu_seconds, _cpu_now()
        walls = []
        for _ in range(n):
            t0 = time.perf_counter()
            await sb.exec(["true"])
            walls.append(time.perf_counter() - t0)
        host = _cpu_now() - host0
        box = (await sb.stats()).cpu_seconds - box0
    return {
        "sandbox CPU ms/exec": box / n * 1e3, "control-plane CPU ms/exec": host / n * 1e3,
        "wall P50 ms": pct(walls, 50) * 1e3, "n": n,
    }  # fmt: skip


async def episode_cost(rt: LocalRuntime, spec: EnvironmentSpec, n: int) -> dict[str, float]:
    """Sandbox CPU ms (its cgroup) per episode of a pooled sandbox: a kill of
    every process (as a reset does; it ends the exec server's spawner too)
    and then five ``exec true``, the first of which starts a new spawner."""
    async with await rt.create(spec) as sb:

        async def episode() -> None:
            await sb.kill_processes()
            for _ in range(5):
                await sb.exec(["true"])

        for _ in range(3):
            await episode()
        box0 = (await sb.stats()).cpu_seconds
        for _ in range(n):
            await episode()
        box = (await sb.stats()).cpu_seconds - box0
    return {"sandbox CPU ms/episode": box / n * 1e3, "n": n}


async def run_mode(mode: str, n: int, image: str) -> None:
    """One of the kernel-cost modes (``--mode``), printed, not written as the table."""
    work = Path(tempfile.mkdtemp(prefix="mf-bench-sandbox-"))
    rt = LocalRuntime(LocalRuntimeConfig(root=str(work / "local")))
    await rt.start()
    spec = EnvironmentSpec()
    if image == "busybox":
        spec = EnvironmentSpec(image=str(build_busybox_rootfs(work / "busybox.tar")))
    try:
        if mode == "mounts":
            counts = await mount_calls(rt, spec, n)
            per = {k: v / n for k, v in sorted(counts.items())}
            print(f"mount-family calls per start ({image} image, {n} starts):")
            print(f"  total {sum(per.values()):.1f}  " + "  ".join(
                f"{k} {v:.1f}" for k, v in per.items()))  # fmt: skip
        elif mode == "cgroups":
            before, after, left = await lingering(rt, spec, n, 16)
            print(
                f"memory cgroups the kernel holds: {before} before, {after} after "
                f"{n} sandboxes started, used and destroyed ({after - before:+d}, "
                f"machine-wide); still charged to their removed groups: {left / 2**20:.2f} MiB"
            )
        elif mode == "cold":
            for conc in (1, 16):
                figures = await cold(rt, spec, max(n, conc), conc)
                print(f"cold start, concurrency {conc} ({image} image): " + ", ".join(
                    f"{k} {v:.1f}" for k, v in figures.items()))  # fmt: skip
        elif mode == "exec":
            figures = await exec_cost(rt, spec, n)
            print(f"exec true ({image} image): " + ", ".join(
                f"{k} {v:.2f}" for k, v in figures.items()))  # fmt: skip
            figures = await episode_cost(rt, spec, max(n // 5, 10))
            print(f"kill + 5 x exec true ({image} image): " + ", ".join(
                f"{k} {v:.2f}" for k, v in figures.items()))  # fmt: skip
        elif mode == "density":
            table = await density(rt, spec, n)
            print(f"host memory per sandbox at {n} live ({image} image), MiB:")
            for state, figures in table.items():
                print(f"  {state}: " + ", ".join(f"{k} {v:.2f}" for k, v in figures.items()))
    finally:
        await rt.stop()
        shutil.rmtree(work, ignore_errors=True)

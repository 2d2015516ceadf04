"""Control-plane benchmark: throughput, decision latency, simulator speed and scaling.

    python benchmarks/bench_scheduler.py --quick         # a smoke run
    python benchmarks/bench_scheduler.py                  # the default, a minute or two
    python benchmarks/bench_scheduler.py --tasks 20000 --sim-instances 10000 --sim-tasks 100000

Figures: no-op tasks through the full state machine (SQLite file, and
in-memory SQLite), the P99 of one scheduling decision with 10,000 queued
tasks over 1,000 instances, the simulator's wall time, end-to-end simulated
time as load and fleet grow together, and the same number of no-op tasks
through local Ray (``ray.remote``) as the peer. Ray is optional
(``pip install -e '.[ray]'``); without it the peer row says so.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from megaflow.core.states import TaskState
from megaflow.core.tasks import Resources, RunSpec, TaskSpec
from megaflow.scheduler.abstract import InstanceSpec
from megaflow.scheduler.config import PriorityPolicyConfig, SchedulerConfig
from megaflow.scheduler.dispatch import DispatchCore
from megaflow.scheduler.executors import NoopExecutor
from megaflow.scheduler.service import Scheduler
from megaflow.sim.report import markdown_table
from megaflow.sim.studies import compare, queue_layout_study, scaling_study
from megaflow.storage.factory import Stores
from megaflow.storage.local_artifacts import LocalArtifactStore
from megaflow.storage.memory_bus import MemoryEventBus
from megaflow.storage.memory_queue import MemoryTaskQueue
from megaflow.storage.sqlite import SqliteMetadataStore

RESULTS = Path(__file__).parent / "results" / "scheduler.md"


async def _throughput(n: int, db: str) -> tuple[float, float]:
    """(tasks per wall second, tasks per CPU second of this process)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = db if db == ":memory:" else str(Path(tmp) / "bench.db")
        stores = Stores(
            SqliteMetadataStore(path), MemoryTaskQueue(), MemoryEventBus(),
            LocalArtifactStore(Path(tmp) / "a"),
        )  # fmt: skip
        async with stores:
            cfg = SchedulerConfig(max_concurrency=1000)
            async with Scheduler(cfg, stores, NoopExecutor()) as sched:
                tasks = [TaskSpec(id=f"t{i}", run_id="bench") for i in range(n)]
                start, cpu = time.perf_counter(), time.process_time()
                await sched.submit(RunSpec(id="bench"), tasks)
                counts = await sched.wait("bench")
                took = time.perf_counter() - start
                cpu_took = time.process_time() - cpu
    if counts != {TaskState.SUCCEEDED: n}:
        raise SystemExit(f"benchmark run did not succeed: {counts}")
    return n / took, n / cpu_took


def decision_p99(
    queued: int = 10_000, instances: int = 1_000, samples: int = 5_000
) -> tuple[float, float, float]:
    """One decision with ``queued`` waiting over ``instances`` full ones, in microseconds:
    (median wall, P99 wall, P99 CPU time of this process). On a shared machine the
    wall P99 includes time the process waited for a core; the CPU time does not."""
    rng = random.Random(0)
    core = DispatchCore(SchedulerConfig(policy=PriorityPolicyConfig(), max_concurrency=10**6))
    for k in range(instances):
        core.add_instance(InstanceSpec(f"i{k}", cpu=8, memory_mb=32768, slots=8))
    shapes = [Resources(cpu=c, memory_mb=m) for c, m in ((0.5, 1024), (1, 2048), (2, 4096))]

    def spec(i: int) -> TaskSpec:
        return TaskSpec(
            id=f"t{i}", run_id=f"r{i % 10}", priority=rng.randint(0, 9),
            resources=rng.choice(shapes),
        )  # fmt: skip

    i = 0
    while True:  # fill the cluster
        core.submit(spec(i), now=0.0)
        i += 1
        if not core.plan(0.0):
            break
    while core.depth < queued:
        core.submit(spec(i), now=0.0)
        i += 1
    running = list(core.running)
    times, cpu = [], []
    for s in range(samples):
        victim = running.pop(rng.randrange(len(running)))
        core.finish(victim, float(s))
        core.submit(spec(i), now=float(s))
        i += 1
        t0, c0 = time.perf_counter_ns(), time.process_time_ns()
        made = core.plan(float(s))
        times.append(time.perf_counter_ns() - t0)
        cpu.append(time.process_time_ns() - c0)
        running.extend(d.task.id for d in made)
    times.sort()
    cpu.sort()
    p99 = int(0.99 * samples)
    return statistics.median(times) / 1000, times[p99] / 1000, cpu[p99] / 1000


def ray_noop(n: int) -> float | None:
    try:
        import ray
    except ImportError:
        return None
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:

        @ray.remote
        def noop() -> None:
            return None

        ray.get([noop.remote() for _ in range(min(n, 200))])  # warm the workers
        start = time.perf_counter()
        ray.get([noop.remote() for _ in range(n)])
        return n / (time.perf_counter() - start)
    finally:
        ray.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="Small runs, for a smoke test.")
    ap.add_argument("--tasks", type=int, help="No-op tasks per throughput run.")
    ap.add_argument("--sim-instances", type=int, help="Simulated instances (default 1,000).")
    ap.add_argument("--sim-tasks", type=int, help="Simulated tasks (default 10,000).")
    ap.add_argument("--no-ray", action="store_true", help="Skip the Ray peer.")
    args = ap.parse_args()
    n = args.tasks or (2_000 if args.quick else 5_000)
    sim_i = args.sim_instances or (500 if args.quick else 1_000)
    sim_t = args.sim_tasks or (5_000 if args.quick else 10_000)
    console = Console(width=max(Console().width, 130))
    rows: list[tuple[str, str, str]] = []

    def row(figure: str, value: str, target: str) -> None:
        rows.append((figure, value, target))
        console.print(f"  {figure}: [bold]{value}[/]")

    load = os.getloadavg()[0]
    console.print(
        f"machine: {os.cpu_count()} cores, load average {load:.1f}, python {sys.version.split()[0]}"
    )
    sqlite_rate, sqlite_cpu = asyncio.run(_throughput(n, "file"))
    row(
        f"no-op tasks, full state machine, SQLite file ({n:,})",
        f"{sqlite_rate:,.0f}/s",
        ">= 5,000/s",
    )
    row("  the same per CPU-second of the process", f"{sqlite_cpu:,.0f}/s", "-")
    mem_rate, mem_cpu = asyncio.run(_throughput(n, ":memory:"))
    row(f"same, in-memory stores ({n:,})", f"{mem_rate:,.0f}/s", ">= 20,000/s")
    row("  the same per CPU-second of the process", f"{mem_cpu:,.0f}/s", "-")
    ray_rate = None if args.no_ray else ray_noop(n)
    if ray_rate is None:
        row(f"peer: local Ray no-op ({n:,})", "not measured (Ray not installed, or --no-ray)", "-")
    else:
        row(f"peer: local Ray ray.remote no-op ({n:,})", f"{ray_rate:,.0f}/s", "-")
        row("MegaFlow in-memory / Ray", f"{mem_rate / ray_rate:.2f}x", "-")
    med, p99, p99_cpu = decision_p99()
    row("decision, 10,000 queued over 1,000 instances: median (wall)", f"{med:,.0f} us", "-")
    row("decision P99 (wall)", f"{p99:,.0f} us", "<= 1,000 us")
    row("decision P99 (CPU time of the process)", f"{p99_cpu:,.0f} us", "<= 1,000 us")
    start = time.perf_counter()
    sims = compare(["priority"], instances=sim_i, tasks=sim_t, seed=0)
    wall = time.perf_counter() - start
    row(f"simulator, {sim_i:,} instances x {sim_t:,} tasks", f"{wall:,.1f} s wall", "<= 120 s")
    sizes = [1, 10, 100, 1_000, 10_000]
    scale = scaling_study(sizes)
    spans = [r.makespan_s for r in scale.values()]
    spread = max(spans) / min(spans) - 1
    row(
        "end-to-end simulated time, 1 -> 10,000 tasks, autoscaled",
        f"{min(spans) / 60:,.1f}-{max(spans) / 60:,.1f} min (spread {spread:.1%})",
        "flat within 10%",
    )
    layout = queue_layout_study(100 if args.quick else 300, 3_000 if args.quick else 10_000,
                                [0.5, 0.7, 0.8, 0.9])  # fmt: skip

    table = Table(title="MegaFlow control plane")
    for col in ("figure", "measured", "target"):
        table.add_column(col)
    for r in rows:
        table.add_row(*r)
    console.print(table)
    loads = f"{load:.1f} at start, {os.getloadavg()[0]:.1f} at end"
    md = [
        "# Scheduler benchmark\n",
        f"{os.cpu_count()} cores (load average {loads}); tasks per run: {n:,}.\n",
    ]
    md += ["| figure | measured | target |", "|---|---|---|"]
    md += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    md += ["", f"## Simulator, {sim_i:,} instances, {sim_t:,} tasks\n", markdown_table(sims)]
    md += ["## End-to-end time as load and fleet grow\n", markdown_table(scale, "load")]
    md += ["## Shared vs per-type queues (priority policy)\n", markdown_table(layout, "mix")]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text("\n".join(md))
    console.print(f"written to {RESULTS}")


if __name__ == "__main__":
    main()

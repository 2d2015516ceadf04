"""Rollout throughput: many concurrent sandboxed episodes, and what orchestration costs.

The workload: N episodes (1,024 by default, as one RL step of the MegaFlow
paper), each a short sandboxed task of 5 exec steps driven by a scripted
agent. Five sides, interleaved for at least three repetitions, every other
one in the reverse order (ideal, MegaFlow, bare, control plane, Ray, then
Ray, control plane, bare, MegaFlow, ideal, ...), as what one run leaves to
the kernel falls on the next:

- ideal: the sandbox work itself (create, 5 execs, destroy, called directly
  on the local runtime, one episode at a time), in CPU seconds of this
  process and its children (the sandboxes) per episode, times N, over the
  cores; beside it the whole machine's busy core-time over the same episodes,
  which also counts the kernel threads that tear down a sandbox's namespaces
  and cgroups (work no process is charged for);
- MegaFlow: the N episodes through the real stack (scheduler with its state
  machine, sandbox pool, builtin agent, recording model client), all
  concurrent; orchestration overhead = 1 - ideal / wall, and by CPU time
  1 - ideal CPU / MegaFlow CPU;
- bare: the same sandbox work, all N episodes at once on one local runtime
  with ``asyncio.gather``: no scheduler, agent, model or stores; what N
  concurrent sandboxes cost on this machine before any orchestration;
- control plane: the MegaFlow side again with the in-memory dummy runtime
  (``megaflow.environment.dummy``: no sandbox, each exec answered at once),
  concurrent as the MegaFlow side is: the CPU per episode the orchestration
  itself costs, the dummy's own few microseconds included, beside the
  ideal's sandbox CPU per episode. No sandbox runs, so none of the
  contention between live sandboxes is in this figure;
- peer: the same sandbox work with Ray: one async actor per core, each with
  one ``LocalRuntime`` started before the timer (as MegaFlow's runtime, pool
  and scheduler are), the N episodes spread over the actors, all concurrent.

Every side runs the same N episodes after the same untimed warm-up
(``WARMUP`` episodes on each runtime, through the scheduler on MegaFlow's),
under :func:`tuned_gc` (Ray's actors too), with the same start slots
(``max_starting``: one runtime's default, split over Ray's actors). Setup on
every side (runtime start, stores, ``ray.init``, actor start) is outside the
timer. The peer runs the sandbox steps without an agent, a model
client or a state machine, so it does less work than MegaFlow. ``--ab``
runs the ideal and MegaFlow once and prints ``ab`` lines for
``benchmarks/ab.py --before REV``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ab
from ab import cpu_s, interleave, ratios, sandbox_cpu_s, spread
from megaflow.agent.builtin import BuiltinAgent
from megaflow.agent.config import BuiltinAgentConfig
from megaflow.app.attempt import AgentExecutor, Arm
from megaflow.app.gc_tuning import tuned_gc
from megaflow.core.errors import SandboxStartError
from megaflow.core.tasks import RunSpec, TaskSpec
from megaflow.environment.abstract import EnvironmentSpec, Runtime
from megaflow.environment.config import LocalRuntimeConfig, PoolConfig
from megaflow.environment.dummy import DummyRuntime
from megaflow.environment.local import LocalRuntime
from megaflow.environment.pool import SandboxPool
from megaflow.model.client import InProcessModelClient
from megaflow.model.routing import Router
from megaflow.model.scripted import ScriptedBackend, tool_call
from megaflow.model.service import ModelService
from megaflow.scheduler.config import SchedulerConfig
from megaflow.scheduler.service import Scheduler
from megaflow.storage.config import LocalArtifactsConfig, SqliteMetadataConfig, StorageConfig
from megaflow.storage.factory import Stores
from report import LOAD_AT_START, report

MAX_ATTEMPTS = TaskSpec.model_fields["max_attempts"].default
T = TypeVar("T")
STEPS = [f"echo step {i} > /tmp/s{i} && cat /tmp/s{i}" for i in range(5)]
SPEC = EnvironmentSpec(ttl_s=7200)
WARMUP = 1  # untimed episodes on every side (each Ray actor's runtime too) before its timer


async def direct_episode(runtime: LocalRuntime) -> None:
    sandbox = await runtime.create(SPEC)
    try:
        for cmd in STEPS:
            res = await sandbox.exec(cmd, timeout=60)
            assert res.ok, res
    finally:
        await sandbox.destroy()


def busy_s() -> float:
    """Core-seconds the whole machine has spent busy since boot (``/proc/stat``:
    everything but idle and iowait), the kernel's own threads included."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    ticks = [int(v) for v in fields[:8]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


async def warm(runtime: LocalRuntime) -> None:
    for _ in range(WARMUP):
        await direct_episode(runtime)


async def ideal_per_episode(root: Path, n: int) -> tuple[float, float, float]:
    """(CPU seconds, wall seconds, machine busy core-seconds) of one episode's
    sandbox work, run alone: the same N episodes and warm-up as every other side."""
    runtime = LocalRuntime(LocalRuntimeConfig(root=str(root)))
    await runtime.start()
    await warm(runtime)
    c0, t0, b0 = cpu_s() + sandbox_cpu_s(runtime), time.perf_counter(), busy_s()
    for _ in range(n):
        await direct_episode(runtime)
    cpu, wall = cpu_s() + sandbox_cpu_s(runtime) - c0, time.perf_counter() - t0
    busy = busy_s() - b0
    await runtime.stop()
    return cpu / n, wall / n, busy / n


def scripted_client() -> InProcessModelClient:
    script = [tool_call("bash", {"command": c}, f"c{i}") for i, c in enumerate(STEPS)]
    script.append(tool_call("submit", {}, "done"))
    router = Router([ScriptedBackend(script)], max_concurrency=100_000)
    return InProcessModelClient(ModelService("scripted", router))


async def bare(root: Path, n: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds) for N episodes of the sandbox work alone, all
    concurrent on one local runtime: no scheduler, agent, model or stores. What
    running this many sandboxes at once costs before any orchestration."""
    runtime = LocalRuntime(LocalRuntimeConfig(root=str(root)))
    await runtime.start()
    await warm(runtime)
    c0, t0 = cpu_s() + sandbox_cpu_s(runtime), time.perf_counter()
    await asyncio.gather(*(direct_episode(runtime) for _ in range(n)))
    wall, cpu = time.perf_counter() - t0, cpu_s() + sandbox_cpu_s(runtime) - c0
    await runtime.stop()
    return wall, cpu


async def megaflow(root: Path, n: int, dummy: bool = False) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process and its sandboxes) for N episodes;
    ``dummy``: on the in-memory dummy runtime, so the control plane's CPU alone."""
    stores = Stores.from_config(
        StorageConfig(
            metadata=SqliteMetadataConfig(path=str(root / "m.db")),
            artifacts=LocalArtifactsConfig(root=str(root / "artifacts")),
        )
    )
    await stores.start()
    runtime: Runtime = (
        DummyRuntime() if dummy else LocalRuntime(LocalRuntimeConfig(root=str(root / "sb")))
    )
    await runtime.start()
    pool = SandboxPool(runtime, "ephemeral", PoolConfig(warm_share=0))
    await pool.start()
    model = scripted_client()
    await model.start()
    agent = BuiltinAgent(BuiltinAgentConfig(max_steps=10))
    executor = AgentExecutor(pool, {"rollout": Arm(agent, model)}, stores.artifacts, SPEC)
    sched = Scheduler(SchedulerConfig(max_concurrency=n), stores, executor)
    await sched.start()
    warmup = [
        TaskSpec(id=f"warm/e{i}", run_id="warm", payload={"prompt": "run the steps"})
        for i in range(WARMUP)
    ]
    await sched.submit(RunSpec(id="warm"), warmup)  # untimed, as every side's warm-up
    await sched.wait("warm")
    tasks = [
        TaskSpec(id=f"rollout/e{i}", run_id="rollout", payload={"prompt": "run the steps"})
        for i in range(n)
    ]
    c0, t0 = cpu_s() + sandbox_cpu_s(runtime), time.perf_counter()
    await sched.submit(RunSpec(id="rollout"), tasks)
    counts = await sched.wait("rollout")
    wall, cpu = time.perf_counter() - t0, cpu_s() + sandbox_cpu_s(runtime) - c0
    await sched.stop()
    await model.stop()
    await pool.stop()
    await runtime.stop()
    await stores.stop()
    done = sum(v for k, v in counts.items() if k.value == "succeeded")
    assert done == n, f"only {done} of {n} episodes succeeded: {counts}"
    return wall, cpu


class RayWorker:
    """One Ray actor: one local runtime, started and warmed before the timer, many
    episodes. The actors' runtimes share the start slots one runtime has elsewhere
    (``max_starting``), and each actor runs under :func:`tuned_gc`, as the other
    sides do."""

    def __init__(self, root: str, max_starting: int) -> None:
        self.root = root
        self.max_starting = max_starting
        self.runtime: LocalRuntime | None = None
        self.gc = contextlib.ExitStack()

    async def start(self) -> float:
        self.gc.enter_context(tuned_gc())
        cfg = LocalRuntimeConfig(root=self.root, max_starting=self.max_starting)
        self.runtime = LocalRuntime(cfg)
        await self.runtime.start()
        await warm(self.runtime)
        return self.cpu()

    async def episode(self) -> int:
        """One episode; a sandbox that fails to start is retried up to MAX_ATTEMPTS in
        all, as MegaFlow's scheduler retries infrastructure failures. Returns retries."""
        assert self.runtime is not None
        for attempt in range(MAX_ATTEMPTS):
            try:
                await direct_episode(self.runtime)
                return attempt
            except SandboxStartError:
                if attempt == MAX_ATTEMPTS - 1:
                    raise
        return MAX_ATTEMPTS

    def cpu(self) -> float:
        return cpu_s() + (0.0 if self.runtime is None else sandbox_cpu_s(self.runtime))

    async def stop(self) -> float:
        if self.runtime is not None:
            await self.runtime.stop()
        self.gc.close()
        return self.cpu()


def ray_peer(root: Path, n: int, workers: int) -> tuple[float, float, int] | str:
    """(wall seconds, CPU seconds of the actors and their sandboxes, sandbox start
    retries) for N episodes."""
    try:
        import ray
    except ImportError:
        return "ray not installed (pip install -e '.[ray]')"
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    ray.cloudpickle.register_pickle_by_value(ab)  # the actors need not import it
    try:
        actor = ray.remote(num_cpus=0, max_concurrency=max(n, 1))(RayWorker)
        slots = max(1, 32 * (os.cpu_count() or 1) // workers)  # one runtime's default in all
        pool = [actor.remote(str(root / f"w{k}"), slots) for k in range(workers)]
        ray.get([w.start.remote() for w in pool])
        c0 = ray.get([w.cpu.remote() for w in pool])
        t0 = time.perf_counter()
        retries = ray.get([pool[i % workers].episode.remote() for i in range(n)])
        wall = time.perf_counter() - t0
        c1 = ray.get([w.cpu.remote() for w in pool])
        ray.get([w.stop.remote() for w in pool])
        return wall, sum(c1) - sum(c0), sum(retries)
    finally:
        ray.shutdown()


def tuned(run: Coroutine[Any, Any, T]) -> T:
    """Run one side as ``megaflow run`` runs a job: under :func:`tuned_gc`."""
    with tuned_gc():
        return asyncio.run(run)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--episodes", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=3, help="interleaved repetitions (>= 3)")
    ap.add_argument("--quick", action="store_true", help="64 episodes")
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument(
        "--ab",
        action="store_true",
        help="ideal and MegaFlow once each, as `ab` lines for benchmarks/ab.py",
    )
    args = ap.parse_args()
    n = 64 if args.quick else args.episodes
    if args.ab:
        with tempfile.TemporaryDirectory() as tmp:
            cpu_ep, _, _ = tuned(ideal_per_episode(Path(tmp) / "ideal", n))
            wall, cpu = tuned(megaflow(Path(tmp) / "mf", n))
        print(
            f"ab ideal-cpu-ms/episode {cpu_ep * 1000:.2f}\nab cpu-ms/episode {cpu / n * 1000:.2f}"
            f"\nab wall-s {wall:.2f}\nab cpu-overhead {1 - cpu_ep * n / cpu:.4f}"
        )
        return
    reps = max(3, args.reps)
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        runs = iter(range(10**6))
        sides = [
            lambda: tuned(ideal_per_episode(root / f"ideal{next(runs)}", n)),
            lambda: tuned(megaflow(root / f"mf{next(runs)}", n)),
            lambda: tuned(bare(root / f"bare{next(runs)}", n)),
            lambda: tuned(megaflow(root / f"cp{next(runs)}", n, dummy=True)),
        ]
        if not args.no_ray:
            sides.append(lambda: ray_peer(root / f"ray{next(runs)}", n, cores))
        got = interleave(reps, sides, alternate=True)
    ideal_runs: list[tuple[float, float, float]] = got[0]  # type: ignore[assignment]
    mf_runs: list[tuple[float, float]] = got[1]  # type: ignore[assignment]
    bare_runs: list[tuple[float, float]] = got[2]  # type: ignore[assignment]
    bare_wall = [w for w, _ in bare_runs]
    cpu_ep = [c for c, _, _ in ideal_runs]
    wall_ep = [w for _, w, _ in ideal_runs]
    busy_ep = [b for _, _, b in ideal_runs]
    ideal = [n * c / cores for c in cpu_ep]
    ideal_busy = [n * b / cores for b in busy_ep]
    mf_wall = [w for w, _ in mf_runs]
    mf_cpu = [c / n for _, c in mf_runs]
    secs, msec, pct = "{:.1f} s".format, (lambda v: f"{v * 1000:.0f} ms"), "{:.1%}".format
    x = "{:.2f}x".format
    rows = [
        ["ideal: sandbox work / cores", spread(ideal, secs),
         f"{spread(cpu_ep, msec)} CPU ({spread(wall_ep, msec)} wall) per episode", ""],
        ["  the same, as the machine's busy time", spread(ideal_busy, secs),
         f"{spread(busy_ep, msec)} busy core-time per episode, the kernel's threads included",
         ""],
        ["MegaFlow (scheduler + pool + agent + model)", spread(mf_wall, secs),
         f"overhead 1 - ideal/wall = {spread([1 - r for r in ratios(ideal, mf_wall)], pct)}; "
         f"by busy time {spread([1 - r for r in ratios(ideal_busy, mf_wall)], pct)}",
         "<= 10%"],
        ["  its CPU per episode (process + sandboxes)", spread(mf_cpu, msec),
         f"overhead 1 - ideal CPU/CPU = {spread([1 - r for r in ratios(cpu_ep, mf_cpu)], pct)}",
         ""],
    ]  # fmt: skip
    rows += [
        ["bare: the sandbox work alone, all concurrent", spread(bare_wall, secs),
         f"1 - ideal/wall = {spread([1 - r for r in ratios(ideal, bare_wall)], pct)}; "
         f"MegaFlow wall / bare wall, pair by pair: {spread(ratios(mf_wall, bare_wall), x)}",
         ""],
        ["  its CPU per episode (process + sandboxes)", spread([c / n for _, c in bare_runs], msec),
         "no scheduler, agent, model client or stores: one runtime, asyncio.gather", ""],
    ]  # fmt: skip
    cp_runs: list[tuple[float, float]] = got[3]  # type: ignore[assignment]
    cp_cpu = [c / n for _, c in cp_runs]
    rows.append(
        ["control plane: MegaFlow on the dummy runtime", spread([w for w, _ in cp_runs], secs),
         f"{spread([c * 1000 for c in cp_cpu], '{:.2f} ms'.format)} CPU per episode = "
         f"{spread(ratios(cp_cpu, cpu_ep), pct)} of the ideal's CPU per episode", ""]
    )  # fmt: skip
    peer_runs = [] if args.no_ray else got[4]
    if args.no_ray:
        rows.append(["peer: Ray", "-", "skipped (--no-ray)", ""])
    elif any(isinstance(r, str) for r in peer_runs):
        rows.append(["peer: Ray", "-", next(r for r in peer_runs if isinstance(r, str)), ""])
    else:
        ray_runs = [r for r in peer_runs if isinstance(r, tuple)]
        ray_wall = [r[0] for r in ray_runs]
        ray_cpu = [r[1] / n for r in ray_runs]
        rows += [
            [f"peer: Ray, {cores} actors, one LocalRuntime each", spread(ray_wall, secs),
             f"Ray wall / MegaFlow wall, pair by pair: {spread(ratios(ray_wall, mf_wall), x)}",
             ""],
            ["  its CPU per episode (actors + sandboxes)", spread(ray_cpu, msec),
             f"not counted: raylet and GCS; start retries: {sum(r[2] for r in ray_runs)}",
             ""],
        ]  # fmt: skip
    report(
        "rollout",
        f"Rollout: {n} concurrent episodes of 5 sandboxed exec steps ({cores} cores)",
        ["what", "wall time", "figure", "target"],
        rows,
        notes=f"Median (min-max) of {reps} interleaved repetitions "
        "(ideal, MegaFlow, bare, control plane, Ray, then the reverse, ...); "
        "ratios are taken within each repetition. Ideal is the CPU time of this process and "
        "its sandboxes (getrusage, self + children, and the sandboxes' cgroup) while "
        "episodes run one at a time directly on the local runtime, so other work on the "
        "machine does not count; the row below it is the whole machine's busy core-time "
        "(/proc/stat) over the same episodes, which also counts the kernel's own threads "
        "(namespace and cgroup teardown, RCU, the journal) and anything else running, so it "
        "is only meaningful on a quiet machine. The ideal, MegaFlow and bare sides run "
        "under tuned_gc(), as `megaflow run` runs a job. Setup is outside "
        "the timer on every side: MegaFlow's stores, runtime, pool and scheduler; Ray's "
        f"ray.init and {cores} actors, each starting one LocalRuntime. The Ray peer runs the "
        "sandbox steps only (no agent, model client or task state machine), and retries a "
        f"sandbox that fails to start, up to {MAX_ATTEMPTS} attempts, as MegaFlow's scheduler "
        "retries infrastructure failures.",
        load_before=LOAD_AT_START,
        self_loading=f"{n:,} concurrent sandboxes (runnable processes count in the load)",
    )


if __name__ == "__main__":
    main()

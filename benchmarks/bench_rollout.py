"""Rollout throughput: many concurrent sandboxed episodes, and what orchestration costs.

The workload: N episodes (1,024 by default, as one RL step of the MegaFlow
paper), each a short sandboxed task of 5 exec steps driven by a scripted
agent. Three measurements in one run:

- ideal: the sandbox work itself (create, 5 execs, destroy, called directly
  on the local runtime, one episode at a time) in CPU seconds of the whole
  machine per episode, times N, over the cores;
- MegaFlow: the N episodes through the real stack (scheduler with its state
  machine, sandbox pool, builtin agent, recording model client), all
  concurrent; orchestration overhead = 1 - ideal / wall;
- peer: the same episodes written as a user would with Ray: each episode a
  ``ray.remote`` function that starts the same bubblewrap sandbox.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from megaflow.agent.builtin import BuiltinAgent
from megaflow.agent.config import BuiltinAgentConfig
from megaflow.app.executor import AgentExecutor, Arm
from megaflow.core.tasks import RunSpec, TaskSpec
from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.config import LocalRuntimeConfig, PoolConfig
from megaflow.environment.local import LocalRuntime
from megaflow.environment.pool import SandboxPool
from megaflow.model.client import InProcessModelClient
from megaflow.model.routing import Router
from megaflow.model.scripted import ScriptedBackend, tool_call
from megaflow.model.service import ModelService
from megaflow.scheduler.config import SchedulerConfig
from megaflow.scheduler.service import Scheduler
from megaflow.storage.config import SqliteMetadataConfig, StorageConfig
from megaflow.storage.factory import Stores
from report import report

STEPS = [f"echo step {i} > /tmp/s{i} && cat /tmp/s{i}" for i in range(5)]
SPEC = EnvironmentSpec(ttl_s=7200)


def cpu_busy_s() -> float:
    """CPU seconds the whole machine spent busy. Sandboxes run in their own
    process trees and cgroups, so the machine-wide figure is the one that
    counts all their work; it is only meaningful on an otherwise idle machine."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


async def direct_episode(runtime: LocalRuntime) -> None:
    sandbox = await runtime.create(SPEC)
    try:
        for cmd in STEPS:
            res = await sandbox.exec(cmd, timeout=60)
            assert res.ok, res
    finally:
        await sandbox.destroy()


async def ideal_per_episode(root: Path, n: int) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one episode's sandbox work, run alone."""
    runtime = LocalRuntime(LocalRuntimeConfig(root=str(root)))
    await runtime.start()
    await direct_episode(runtime)  # warm caches
    c0, t0 = cpu_busy_s(), time.perf_counter()
    for _ in range(n):
        await direct_episode(runtime)
    cpu, wall = cpu_busy_s() - c0, time.perf_counter() - t0
    await runtime.stop()
    return cpu / n, wall / n


def scripted_client() -> InProcessModelClient:
    script = [tool_call("bash", {"command": c}, f"c{i}") for i, c in enumerate(STEPS)]
    script.append(tool_call("submit", {}, "done"))
    router = Router([ScriptedBackend(script)], max_concurrency=100_000)
    return InProcessModelClient(ModelService("scripted", router))


async def megaflow(root: Path, n: int) -> float:
    stores = Stores.from_config(
        StorageConfig(metadata=SqliteMetadataConfig(path=str(root / "m.db")))
    )
    await stores.start()
    runtime = LocalRuntime(LocalRuntimeConfig(root=str(root / "sb")))
    await runtime.start()
    pool = SandboxPool(runtime, "ephemeral", PoolConfig(warm_share=0))
    await pool.start()
    model = scripted_client()
    await model.start()
    agent = BuiltinAgent(BuiltinAgentConfig(max_steps=10))
    executor = AgentExecutor(pool, {"rollout": Arm(agent, model)}, stores.artifacts, SPEC)
    sched = Scheduler(SchedulerConfig(max_concurrency=n), stores, executor)
    await sched.start()
    tasks = [
        TaskSpec(id=f"rollout/e{i}", run_id="rollout", payload={"prompt": "run the steps"})
        for i in range(n)
    ]
    t0 = time.perf_counter()
    await sched.submit(RunSpec(id="rollout"), tasks)
    counts = await sched.wait("rollout")
    wall = time.perf_counter() - t0
    await sched.stop()
    await model.stop()
    await pool.stop()
    await runtime.stop()
    await stores.stop()
    done = sum(v for k, v in counts.items() if k.value == "succeeded")
    assert done == n, f"only {done} of {n} episodes succeeded: {counts}"
    return wall


def ray_peer(root: Path, n: int) -> float | str:
    try:
        import ray
    except ImportError:
        return "ray not installed (pip install -e '.[ray]')"
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(include_dashboard=False, log_to_driver=False)
    try:

        @ray.remote
        def episode(sandbox_root: str) -> None:
            async def go() -> None:
                runtime = LocalRuntime(LocalRuntimeConfig(root=sandbox_root))
                await runtime.start()
                try:
                    await direct_episode(runtime)
                finally:
                    await runtime.stop()

            asyncio.run(go())

        ray.get(episode.remote(str(root / "ray-warm")))
        t0 = time.perf_counter()
        ray.get([episode.remote(str(root / "ray")) for _ in range(n)])
        return time.perf_counter() - t0
    finally:
        ray.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--episodes", type=int, default=1024)
    ap.add_argument("--quick", action="store_true", help="64 episodes")
    ap.add_argument("--no-ray", action="store_true")
    args = ap.parse_args()
    n = 64 if args.quick else args.episodes
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cpu_ep, wall_ep = asyncio.run(ideal_per_episode(root / "ideal", 16))
        ideal = n * cpu_ep / cores
        mf = asyncio.run(megaflow(root / "mf", n))
        peer = "skipped (--no-ray)" if args.no_ray else ray_peer(root, n)
    rows = [
        ["ideal: sandbox work / cores", f"{ideal:.1f} s",
         f"{cpu_ep * 1000:.0f} ms CPU ({wall_ep * 1000:.0f} ms wall) per episode", ""],
        ["MegaFlow (scheduler + pool + agent + model)", f"{mf:.1f} s",
         f"overhead 1 - ideal/wall = {1 - ideal / mf:.1%}", "<= 15%"],
    ]  # fmt: skip
    if isinstance(peer, float):
        rows.append(["peer: Ray, ray.remote per episode", f"{peer:.1f} s",
                     f"MegaFlow is {peer / mf:.2f}x faster", ""])  # fmt: skip
    else:
        rows.append(["peer: Ray", "-", peer, ""])
    report(
        "rollout",
        f"Rollout: {n} concurrent episodes of 5 sandboxed exec steps ({cores} cores)",
        ["what", "wall time", "figure", "target"],
        rows,
        notes="Ideal counts the busy CPU time of the whole machine while episodes run one at "
        f"a time directly on the local runtime (start, exec, teardown). Load average at the "
        f"start: {os.getloadavg()[0]:.1f}; the figures hold only on an otherwise idle machine.",
    )


if __name__ == "__main__":
    main()

"""The ray fleet on a real Ray cluster on loopback: throughput per node count, and a lost node.

A head with no CPUs and 1, 2, then 3 worker nodes, each started with
``ray start`` (the test fixture's ``RayCluster``) and offering ``SLOTS``
sandbox slots and as many Ray CPUs. Every node runs on this machine, so they
share its cores: more nodes add raylets, node agents and worker processes,
not CPU, and per-node scaling here says what the extra processes cost, not
what more machines would give.

For each node count, two workloads, through both sides in turn (MegaFlow,
Ray, MegaFlow, Ray ...) for ``--reps`` repetitions:

- **no-op**: MegaFlow runs a round of tasks through ``fleet: {type: ray}``
  (``megaflow run``'s ``Job``: scheduler and state machine, the builtin
  agent with a scripted model, each sandbox call over gRPC to the node
  agent) on the ``dummy`` runtime, so the node's sandboxes are in memory and
  run nothing. The peer: as many ``@ray.remote`` no-op tasks, spread over
  the nodes.
- **sandboxed**: the same round on the ``local`` runtime: each task's
  sandbox is a real bubblewrap sandbox on its node (create, the agent's
  ``echo done`` and its ``git diff``, destroy). The peer: as many
  ``@ray.remote`` tasks doing that same sandbox work on a ``LocalRuntime``
  of their worker process (started once per worker, before the timer).

Both sides hold one task per slot: MegaFlow's scheduler a node's slots, Ray
one CPU per task and ``SLOTS`` CPUs per node. Setup (cluster, job, node
agents; the peer's worker processes, one per Ray CPU, and their runtimes) is
outside the timer: a warm-up round runs first on both sides.

**A lost node** (3 nodes, once per side): 2 tasks per node, each a 3 s sleep,
all running; then the worker node holding the most is SIGKILLed (its raylet
and everything under it). The figure is the time from the kill to each of
its tasks starting again on a surviving node: for MegaFlow the retry
attempt's start (the scheduler hands it to the executor; its sandbox start
follows), with the fleet's default ``poll_s`` and ``lost_after_s``; for
Ray, the retried task's function starting on its new worker (Ray's default
task retries and node health checks). A node is added back between the two.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fixtures.ray_cluster import RayCluster, RayNode
from tests.reliability.ledger import read_ledger

from ab import ratios, spread
from megaflow.app.assembly import base_spec
from megaflow.app.job import Job
from megaflow.config import parse_config
from megaflow.config.models import RunConfig
from megaflow.core.states import TaskState
from report import LOAD_AT_START, report

SLOTS = 4
COMMAND = "echo done"
AGENT_EXECS: list[Any] = [COMMAND, ["git", "-C", "/workspace", "diff"]]
"""What the builtin agent runs in its sandbox for one scripted step without a repository."""
LOSS_SLEEP_S = 3


def run_config(tmp: Path, address: str, runtime: str, n: int, slots: int, cmd: str) -> RunConfig:
    env_runtime: dict[str, Any] = {"type": "dummy"}
    if runtime == "local":
        env_runtime = {"type": "local", "root": str(tmp / "sb")}
    return parse_config({
        "name": f"fleet-{runtime}", "max_attempts": 3,
        "tasks": {"type": "inline", "tasks": [
            {"id": f"t{i}", "payload": {"problem_statement": "go"}} for i in range(n)
        ]},
        "agent": {"type": "builtin", "max_steps": 4},
        "model": {"type": "scripted", "bash": [cmd]},
        "environment": {"runtime": env_runtime, "pool": {"warm_share": 0}},
        "scheduler": {"max_concurrency": slots, "retry": {"base_s": 0.05, "max_s": 0.2}},
        "fleet": {"type": "ray", "address": address},
        "storage": {
            "metadata": {"type": "sqlite", "path": str(tmp / f"{runtime}-{time.time_ns()}.db")},
            "artifacts": {"type": "local", "root": str(tmp / "art")},
        },
    })  # fmt: skip


# -- the peer: plain Ray tasks ----------------------------------------------------------
_WORKER: dict[str, Any] = {}
"""The peer's per-worker-process state: its LocalRuntime and the loop that runs it."""


def _noop(hold_s: float = 0.0) -> None:
    time.sleep(hold_s)


def _sandboxed(runtime_json: str, spec_json: str, execs: list[Any], hold_s: float = 0.0) -> int:
    """One task's sandbox work, as the agent does it, on this worker's runtime (started
    on the worker's first call); then hold the worker ``hold_s`` (the warm-up's way to
    make Ray start one worker per CPU)."""
    from megaflow.environment.abstract import EnvironmentSpec
    from megaflow.environment.config import LocalRuntimeConfig
    from megaflow.environment.factory import make_runtime

    if "runtime" not in _WORKER:
        loop = asyncio.new_event_loop()
        threading.Thread(target=loop.run_forever, daemon=True).start()
        cfg = LocalRuntimeConfig.model_validate_json(runtime_json)
        cfg = cfg.model_copy(update={"root": f"{cfg.root}/peer-{os.getpid()}"})
        runtime = make_runtime(cfg)
        asyncio.run_coroutine_threadsafe(runtime.start(), loop).result()
        _WORKER.update(loop=loop, runtime=runtime)
    spec = EnvironmentSpec.model_validate_json(spec_json)

    async def body() -> int:
        sandbox = await _WORKER["runtime"].create(spec)
        try:
            return sum([(await sandbox.exec(c)).exit_code for c in execs])
        finally:
            await sandbox.destroy()

    code = int(asyncio.run_coroutine_threadsafe(body(), _WORKER["loop"]).result()) if execs else 0
    time.sleep(hold_s)
    return code


def _sleeper(i: int, seconds: float, marks: str) -> tuple[int, float]:
    """Loss peer: note (task, node, start) in ``marks`` (a folder: all nodes are this
    machine), sleep, return (task, start)."""
    import ray

    t = time.time()
    node = ray.get_runtime_context().get_node_id()
    Path(marks, f"{i}-{time.time_ns()}").write_text(json.dumps([i, node, t]))
    time.sleep(seconds)
    return i, t


class RayPeer:
    def __init__(self, cfg: RunConfig) -> None:
        import ray

        self.ray = ray
        self.noop: Any = ray.remote(num_cpus=1)(_noop).options(scheduling_strategy="SPREAD")
        self.sandboxed: Any = ray.remote(num_cpus=1)(_sandboxed).options(
            scheduling_strategy="SPREAD"
        )
        self.args = (
            cfg.environment.runtime.model_dump_json(),
            base_spec(cfg).model_dump_json(),
            AGENT_EXECS,
        )

    def warm(self, kind: str, slots: int, n: int) -> None:
        """Have Ray start a worker per CPU (each held busy a while) and, for the
        sandboxed peer, its runtime; then one untimed round."""
        if kind == "noop":
            self.ray.get([self.noop.remote(1.5) for _ in range(slots)])
        else:
            rt, spec, _ = self.args
            self.ray.get([self.sandboxed.remote(rt, spec, [], 1.5) for _ in range(slots)])
        self.round(kind, n)

    def round(self, kind: str, n: int) -> float:
        t0 = time.perf_counter()
        if kind == "noop":
            self.ray.get([self.noop.remote() for _ in range(n)])
        else:
            codes = self.ray.get([self.sandboxed.remote(*self.args) for _ in range(n)])
            assert len(codes) == n
        return time.perf_counter() - t0


# -- MegaFlow rounds ------------------------------------------------------------------
async def mf_round(job: Job, tag: str, total: list[int]) -> float:
    specs = [s.model_copy(update={"id": f"{s.id}/{tag}"}) for s in job.plan()[job.run_id]]
    t0 = time.perf_counter()
    await job.submit_tasks(specs)
    counts = await job.wait()
    dt = time.perf_counter() - t0
    total[0] += len(specs)
    assert counts[job.run_id] == {TaskState.SUCCEEDED: total[0]}, counts
    return dt


async def wait_agents(job: Job, k: int) -> None:
    assert job.fleet is not None
    deadline = time.monotonic() + 60
    while len(job.fleet.agents) < k:
        assert time.monotonic() < deadline, f"{len(job.fleet.agents)} of {k} node agents"
        await asyncio.sleep(0.2)


async def throughput(
    cluster: RayCluster, tmp: Path, k: int, slots: int, runtime: str, n: int, reps: int
) -> tuple[list[float], list[float]]:
    """Tasks per second of MegaFlow and of the Ray peer on ``k`` nodes holding
    ``slots`` in all, one pair per repetition."""
    cfg = run_config(tmp, cluster.address, runtime, n, slots, COMMAND)
    kind = "noop" if runtime == "dummy" else "sandboxed"
    mf: list[float] = []
    peer: list[float] = []
    async with Job(cfg) as job:
        await wait_agents(job, k)
        await job.submit()
        await job.wait()  # warm-up: gRPC channels and pools of every node
        total = [n]
        ray_peer = RayPeer(cfg)
        await asyncio.to_thread(ray_peer.warm, kind, slots, n)
        for r in range(reps):
            mf.append(n / await mf_round(job, f"r{r}", total))
            peer.append(n / await asyncio.to_thread(ray_peer.round, kind, n))
    return mf, peer


# -- a lost node ----------------------------------------------------------------------
def _node_named(nodes: list[RayNode], node_id: str) -> RayNode:
    import ray

    res = next(n["Resources"] for n in ray.nodes() if n["NodeID"] == node_id)  # type: ignore[no-untyped-call]
    return next(node for node in nodes if node.name in res)


async def mf_loss(cluster: RayCluster, tmp: Path, k: int) -> list[float]:
    n = 2 * k
    cmd = f"sleep {LOSS_SLEEP_S} && echo done"
    cfg = run_config(tmp, cluster.address, "local", n, SLOTS * k, cmd)
    async with Job(cfg) as job:
        fleet = job.fleet
        assert fleet is not None
        await wait_agents(job, k)
        await job.submit()
        deadline = time.monotonic() + 60
        while True:
            alive = {i: (await fleet.actor(i).stats.remote())["alive"] for i in list(fleet.agents)}
            if sum(alive.values()) >= n:
                break
            assert time.monotonic() < deadline, f"tasks never all ran: {alive}"
            await asyncio.sleep(0.05)
        victim = max(alive, key=lambda i: alive[i])
        killed = time.time()
        assert cluster.kill_node(_node_named(cluster.nodes, victim)) > 0
        counts = await asyncio.wait_for(job.wait(), 120)
        assert counts[job.run_id] == {TaskState.SUCCEEDED: n}, counts
        ledger = await read_ledger(job.stores.metadata, job.run_id)
    delays = []
    for atts in ledger.attempts.values():
        if any(a.instance == victim for a in atts):
            again = [a.started_at for a in atts if a.instance != victim and a.started_at > killed]
            assert again, atts
            delays.append(min(again) - killed)
    return delays


def ray_loss(cluster: RayCluster, tmp: Path, k: int) -> list[float]:
    import ray

    n = 2 * k
    marks = tmp / f"marks-{time.time_ns()}"
    marks.mkdir()
    ray.init(
        address=cluster.address, include_dashboard=False, log_to_driver=False,
        logging_level=logging.ERROR,
    )  # fmt: skip
    try:
        sleeper = ray.remote(num_cpus=1, max_retries=3)(_sleeper)
        refs = [
            sleeper.options(scheduling_strategy="SPREAD").remote(i, LOSS_SLEEP_S, str(marks))
            for i in range(n)
        ]
        deadline = time.monotonic() + 60
        while len(list(marks.iterdir())) < n:
            assert time.monotonic() < deadline, "the peer's tasks never all ran"
            time.sleep(0.05)
        first = [json.loads(p.read_text()) for p in marks.iterdir()]
        on: dict[str, list[int]] = {}
        for i, node, _ in first:
            on.setdefault(node, []).append(i)
        victim = max(on, key=lambda nd: len(on[nd]))
        killed = time.time()
        assert cluster.kill_node(_node_named(cluster.nodes, victim)) > 0
        ray.get(refs, timeout=180)
        starts = [json.loads(p.read_text()) for p in marks.iterdir()]
    finally:
        ray.shutdown()
    return [
        min(t for j, node, t in starts if j == i and node != victim and t > killed) - killed
        for i in on[victim]
    ]


# -- the table ------------------------------------------------------------------------
def rate(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:,.1f}"


def seconds(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.2f} s (max {max(values):.2f}, {len(values)} tasks)"


def progress(what: str, t0: float) -> None:
    print(f"[bench_fleet] {what} done at {time.monotonic() - t0:.0f} s", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="One repetition, small rounds.")
    ap.add_argument("--reps", type=int, default=None, help="Repetitions (default 3).")
    ap.add_argument("--nodes", type=int, default=3, help="Largest number of worker nodes.")
    args = ap.parse_args()
    reps, n_noop, n_sbx = (1, 40, 8) if args.quick else (args.reps or 3, 200, 24)
    tmp = Path(tempfile.mkdtemp(prefix="mf-bench-fleet-"))
    rows: list[list[str]] = []
    per_node: dict[str, dict[int, float]] = {"no-op": {}, "sandboxed": {}}
    workloads = (("no-op", "dummy", n_noop), ("sandboxed", "local", n_sbx))
    k = args.nodes
    t0 = time.monotonic()
    cluster = RayCluster()
    try:
        cluster.start_head()
        for nodes in range(1, k + 1):
            cluster.add_nodes([f"node_{nodes}"], slots=SLOTS, cpus=SLOTS)
            for label, runtime, n in workloads:
                mf, peer = asyncio.run(
                    throughput(cluster, tmp, nodes, SLOTS * nodes, runtime, n, reps)
                )
                per_node[label][nodes] = statistics.median(mf)
                progress(f"{label} on {nodes} node(s)", t0)
                rows.append([
                    f"{label}, {nodes} node(s), {SLOTS * nodes} slots, {n} tasks/round",
                    spread(mf, rate), spread(peer, rate), spread(ratios(mf, peer)),
                ])  # fmt: skip
        ray_delays = ray_loss(cluster, tmp, k)
        cluster.add_nodes([f"node_{k + 1}"], slots=SLOTS, cpus=SLOTS)
        mf_delays = asyncio.run(mf_loss(cluster, tmp, k))
        progress("lost node", t0)
    finally:
        cluster.stop()
    # control: the slots of k nodes on one node, so that node count and slot count part
    wide = RayCluster()
    try:
        wide.start_head()
        wide.add_nodes(["wide"], slots=SLOTS * k, cpus=SLOTS * k)
        for label, runtime, n in workloads:
            mf, peer = asyncio.run(throughput(wide, tmp, 1, SLOTS * k, runtime, n, reps))
            per_node[label][-k] = statistics.median(mf)
            progress(f"{label} control", t0)
            rows.append([
                f"{label}, 1 node, {SLOTS * k} slots (control), {n} tasks/round",
                spread(mf, rate), spread(peer, rate), spread(ratios(mf, peer)),
            ])  # fmt: skip
    finally:
        wide.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    for label, by_k in per_node.items():
        one = by_k[1]
        scale = ", ".join(f"{n} nodes {by_k[n] / one:.2f}x" for n in range(2, k + 1))
        control = f"1 node with {SLOTS * k} slots {by_k[-k] / one:.2f}x"
        rows.append([
            f"{label}: MegaFlow tasks/s against 1 node of {SLOTS} slots",
            f"{scale}; {control}", "-", "-",
        ])  # fmt: skip
    rows.append([
        f"node lost (SIGKILL), {k} nodes, {2 * k} tasks of {LOSS_SLEEP_S} s: kill -> "
        "its tasks started on a survivor", seconds(mf_delays), seconds(ray_delays),
        spread([statistics.median(mf_delays) / statistics.median(ray_delays)])
        if mf_delays and ray_delays else "-",
    ])  # fmt: skip
    notes = (
        f"Nodes: `ray start` worker nodes on this machine ({os.cpu_count()} cores shared by "
        f"all of them and the driver), {SLOTS} slots and {SLOTS} Ray CPUs each, a head with no "
        f"CPUs; {reps} repetition(s), sides in turn, each ratio MegaFlow / Ray within a "
        "repetition, median (min-max). MegaFlow runs every task through the scheduler, the "
        "builtin agent and the model client in the driver and each sandbox call over gRPC to "
        "the node's agent (no-op: the `dummy` runtime, in memory; sandboxed: `local`, a "
        "bubblewrap sandbox per task); the Ray peer runs only the task body (no state machine, "
        "agent, model or stored result), its worker processes and their runtimes started "
        "before the timer. Per-node scaling on one machine measures the cost of more "
        "processes on the same cores, not the gain of more machines; the control row puts "
        "all the slots on one node, so slot count and node count can be told apart. The "
        "lost-node row is one "
        "kill per side; MegaFlow's figure is the retry's start in the scheduler (the fleet's "
        "poll_s 0.5 s, lost_after_s 3 s), Ray's the retried function's start on its new node."
    )
    report(
        "fleet",
        "Ray fleet on loopback: tasks per second by node count, and a lost node",
        ["workload", "MegaFlow fleet: {type: ray}", "peer: plain Ray tasks", "MegaFlow / Ray"],
        rows,
        notes,
        load_before=LOAD_AT_START,
    )


if __name__ == "__main__":
    main()

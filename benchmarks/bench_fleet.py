"""The ray fleet on a real Ray cluster on loopback: throughput per node count, and a lost node.

A head with no CPUs and 1, 2, then 3 worker nodes, each started with
``ray start`` (the test fixture's ``RayCluster``) and offering ``SLOTS``
sandbox slots and as many Ray CPUs. Every node runs on this machine, so they
share its cores: more nodes add raylets, node agents and worker processes,
not CPU, and per-node scaling here says what the extra processes cost, not
what more machines would give.

For each node count, two workloads, through both sides in turn for ``--reps``
repetitions, the order alternating (MegaFlow Ray, Ray MegaFlow, ...;
``ab.interleave_reps``), after one untimed round of each:

- **no-op**: MegaFlow runs a round of tasks through ``fleet: {type: ray}``
  (``megaflow run``'s ``Job``: scheduler and state machine, the builtin
  agent with a scripted model, each sandbox call over gRPC to the node
  agent) on the ``dummy`` runtime, so the node's sandboxes are in memory and
  run nothing. The peer: as many ``@ray.remote`` no-op tasks, spread over
  the nodes.
- **sandboxed**: the same round on the ``local`` runtime: each task's
  sandbox is a real bubblewrap sandbox on its node (create, the agent's
  ``echo done``, its look for a ``.git`` above the workdir, which finds none,
  so no ``git diff`` runs; destroy). The peer: as many ``@ray.remote`` tasks
  doing that same sandbox work (the agent's own check, so the same calls) on
  a ``LocalRuntime`` of their worker process (started once per worker,
  before the timer).

Both sides hold one task per slot: MegaFlow's scheduler a node's slots, Ray
one CPU per task and ``SLOTS`` CPUs per node. Setup (cluster, job, node
agents; the peer's worker processes, one per Ray CPU, and their runtimes) is
outside the timer: a warm-up round runs first on both sides.

**A lost node** (3 nodes, ``--loss-reps`` kills per side, the order
alternating): ``SLOTS`` tasks, each creating a sandbox on its node and
running ``sleep 3`` in it, all on one node (MegaFlow's scheduler packs them
there, best fit; Ray's are pinned there, soft affinity, so a retry may go
elsewhere); then that node is SIGKILLed (its raylet and everything under
it). The figure on both sides is the time from the kill to each of its tasks'
command starting again, in a new sandbox on a surviving node: for MegaFlow
the retried attempt's ``bash`` step (its trajectory's ``started_at``), with
the fleet's default ``poll_s`` and ``lost_after_s``; for Ray, the retried
function's mark just before it runs the command (Ray's default task retries
and node health checks). After every kill a fresh node replaces the lost
one, so every trial, on either side, starts on the same number of live nodes
and none is added during a trial. The table gives the tasks on the killed
node per side.
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

from ab import interleave_reps, order_text, ratios, spread
from megaflow.agent.builtin import _in_repository
from megaflow.app.assembly import base_spec
from megaflow.app.job import Job
from megaflow.config import parse_config
from megaflow.config.models import RunConfig
from megaflow.core.states import TaskState
from report import LOAD_AT_START, add_rule_args, begin, report

SLOTS = 4
COMMAND = "echo done"
WORKDIR = "/workspace"
LOSS_SLEEP_S = 3


async def agent_work(sandbox: Any, command: str) -> int:
    """What the builtin agent does in its sandbox for one scripted step and its
    submission: the command, then ``git diff`` only if a ``.git`` is found above
    the workdir (there is none here, so only the agent's file reads run)."""
    code = int((await sandbox.exec(command)).exit_code)
    if await _in_repository(sandbox, WORKDIR):
        code += int((await sandbox.exec(["git", "-C", WORKDIR, "diff"], timeout=60)).exit_code)
    return code


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


def _worker_runtime(runtime_json: str) -> None:
    """This worker's LocalRuntime and the loop that runs it, started on first use."""
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


def _sandboxed(runtime_json: str, spec_json: str, work: bool, hold_s: float = 0.0) -> int:
    """One task's sandbox work, as the agent does it (:func:`agent_work`), on this
    worker's runtime; then hold the worker ``hold_s`` (the warm-up's way to make
    Ray start one worker per CPU)."""
    from megaflow.environment.abstract import EnvironmentSpec

    _worker_runtime(runtime_json)
    spec = EnvironmentSpec.model_validate_json(spec_json)

    async def body() -> int:
        sandbox = await _WORKER["runtime"].create(spec)
        try:
            return await agent_work(sandbox, COMMAND)
        finally:
            await sandbox.destroy()

    code = int(asyncio.run_coroutine_threadsafe(body(), _WORKER["loop"]).result()) if work else 0
    time.sleep(hold_s)
    return code


def _sleeper(i: int, marks: str, runtime_json: str, spec_json: str) -> tuple[int, float]:
    """Loss peer: a sandbox on this worker's runtime; note (task, node, time) in
    ``marks`` (a folder: all nodes are this machine) just before the command runs
    in it, as MegaFlow's trajectory notes its step's start; run it; destroy."""
    import ray

    from megaflow.environment.abstract import EnvironmentSpec

    _worker_runtime(runtime_json)
    spec = EnvironmentSpec.model_validate_json(spec_json)
    node = ray.get_runtime_context().get_node_id()

    async def body() -> float:
        sandbox = await _WORKER["runtime"].create(spec)
        try:
            t = time.time()
            Path(marks, f"{i}-{time.time_ns()}").write_text(json.dumps([i, node, t]))
            await sandbox.exec(f"sleep {LOSS_SLEEP_S}", timeout=60)
            return t
        finally:
            await sandbox.destroy()

    return i, float(asyncio.run_coroutine_threadsafe(body(), _WORKER["loop"]).result())


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
            True,
        )

    def warm(self, kind: str, slots: int, n: int) -> None:
        """Have Ray start a worker per CPU (each held busy a while) and, for the
        sandboxed peer, its runtime; then one untimed round."""
        if kind == "noop":
            self.ray.get([self.noop.remote(1.5) for _ in range(slots)])
        else:
            rt, spec, _ = self.args
            self.ray.get([self.sandboxed.remote(rt, spec, False, 1.5) for _ in range(slots)])
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
    async with Job(cfg) as job:
        await wait_agents(job, k)
        await job.submit()
        await job.wait()  # warm-up: gRPC channels and pools of every node
        total = [n]
        ray_peer = RayPeer(cfg)
        await asyncio.to_thread(ray_peer.warm, kind, slots, n)
        loop = asyncio.get_running_loop()

        def mf_side(r: int) -> float:
            return (
                n / asyncio.run_coroutine_threadsafe(mf_round(job, f"r{r}", total), loop).result()
            )

        def peer_side(_r: int) -> float:
            return n / ray_peer.round(kind, n)

        mf, peer = await asyncio.to_thread(interleave_reps, reps, [mf_side, peer_side])
    return mf, peer


# -- a lost node ----------------------------------------------------------------------
def _node_named(nodes: list[RayNode], node_id: str) -> RayNode:
    import ray

    res = next(n["Resources"] for n in ray.nodes() if n["NodeID"] == node_id)  # type: ignore[no-untyped-call]
    return next(node for node in nodes if node.name in res)


def _command_started(art: Path, run_id: str, task_id: str, number: int) -> float | None:
    """When attempt ``number`` of a task started its ``bash`` step (its trajectory)."""
    path = art / "runs" / run_id / "tasks" / task_id.replace(":", "_")
    got = json.loads((path / f"attempt-{number}" / "trajectory.json").read_text())
    starts = [st["started_at"] for st in got.get("steps", []) if st.get("started_at")]
    return min(starts) if starts else None


async def mf_loss(cluster: RayCluster, tmp: Path, k: int) -> tuple[list[float], int]:
    """(kill -> each lost task's command started on a survivor, tasks on the node)."""
    n = SLOTS
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
    for tid, atts in ledger.attempts.items():
        if any(a.instance == victim for a in atts):
            again = [
                _command_started(tmp / "art", job.run_id, tid, a.number)
                for a in atts if a.instance != victim and a.started_at > killed
            ]  # fmt: skip
            starts = [t for t in again if t is not None]
            assert starts, atts
            delays.append(min(starts) - killed)
    return delays, alive[victim]


def ray_loss(cluster: RayCluster, tmp: Path, k: int) -> tuple[list[float], int]:
    """(kill -> each lost task's command started on a survivor, tasks on the node)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    n = SLOTS
    marks = tmp / f"marks-{time.time_ns()}"
    marks.mkdir()
    cfg = run_config(tmp, cluster.address, "local", n, SLOTS * k, COMMAND)
    rt, spec = cfg.environment.runtime.model_dump_json(), base_spec(cfg).model_dump_json()
    ray.init(
        address=cluster.address, include_dashboard=False, log_to_driver=False,
        logging_level=logging.ERROR,
    )  # fmt: skip
    try:
        workers = [nd["NodeID"] for nd in ray.nodes() if nd["Alive"] and nd["Resources"].get("CPU")]  # type: ignore[no-untyped-call]
        assert len(workers) == k, f"{len(workers)} live worker nodes, not {k}"
        warm: Any = ray.remote(num_cpus=1)(_sandboxed)
        ray.get([  # a worker per CPU on every node, its runtime started, as the agents' are
            warm.options(scheduling_strategy=NodeAffinitySchedulingStrategy(w, soft=False))
            .remote(rt, spec, False, 1.5)
            for w in workers for _ in range(SLOTS)
        ])  # fmt: skip
        on_one = NodeAffinitySchedulingStrategy(workers[0], soft=True)
        sleeper = ray.remote(num_cpus=1, max_retries=3)(_sleeper)
        refs = [
            sleeper.options(scheduling_strategy=on_one).remote(i, str(marks), rt, spec)
            for i in range(n)
        ]
        deadline = time.monotonic() + 120
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
    delays = [
        min(t for j, node, t in starts if j == i and node != victim and t > killed) - killed
        for i in on[victim]
    ]
    return delays, len(on[victim])


def live_workers(cluster: RayCluster, k: int, timeout_s: float = 180) -> None:
    """Wait until Ray counts exactly ``k`` live worker nodes: the killed one declared
    dead and its replacement up, so the next trial starts as the last one did."""
    import ray

    ray.init(
        address=cluster.address, include_dashboard=False, log_to_driver=False,
        logging_level=logging.ERROR,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            nodes = ray.nodes()  # type: ignore[no-untyped-call]
            alive = [nd for nd in nodes if nd["Alive"] and nd["Resources"].get("CPU")]
            if len(alive) == k:
                return
            assert time.monotonic() < deadline, f"{len(alive)} live worker nodes, not {k}"
            time.sleep(0.5)
    finally:
        ray.shutdown()


def losses(cluster: RayCluster, tmp: Path, k: int, reps: int) -> dict[str, Any]:
    """``reps`` kills per side, the order alternating; a fresh node replaces each lost
    one before the next trial, so every trial starts on ``k`` live nodes."""
    added = [k]

    def replace_lost() -> None:
        added[0] += 1
        cluster.add_nodes([f"node_{added[0]}"], slots=SLOTS, cpus=SLOTS)
        live_workers(cluster, k)

    def mf_side(_r: int) -> tuple[list[float], int]:
        got = asyncio.run(mf_loss(cluster, tmp, k))
        replace_lost()
        return got

    def ray_side(_r: int) -> tuple[list[float], int]:
        got = ray_loss(cluster, tmp, k)
        replace_lost()
        return got

    mf, peer = interleave_reps(reps, [mf_side, ray_side])
    return {"mf": mf, "ray": peer}


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
    ap.add_argument("--loss-reps", type=int, default=None, help="Kills per side (default 3).")
    add_rule_args(ap)
    args = ap.parse_args()
    begin(args)
    reps, n_noop, n_sbx = (1, 40, 8) if args.quick else (args.reps or 3, 200, 24)
    loss_reps = args.loss_reps or (1 if args.quick else 3)
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
        lost = losses(cluster, tmp, k, loss_reps)
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
    mf_all = [d for delays, _ in lost["mf"] for d in delays]
    ray_all = [d for delays, _ in lost["ray"] for d in delays]
    per_trial = [
        statistics.median(a) / statistics.median(b)
        for (a, _), (b, _) in zip(lost["mf"], lost["ray"], strict=True) if a and b
    ]  # fmt: skip
    on_mf = sorted({c for _, c in lost["mf"]})
    on_ray = sorted({c for _, c in lost["ray"]})
    rows += [
        [f"node lost (SIGKILL), {k} nodes, {SLOTS} sandboxed tasks of {LOSS_SLEEP_S} s on "
         f"the killed node, {loss_reps} kill(s) per side: kill -> each task's command "
         "started again in a sandbox on a survivor", seconds(mf_all), seconds(ray_all),
         spread(per_trial)],
        ["  tasks on the killed node, per kill", ", ".join(map(str, on_mf)),
         ", ".join(map(str, on_ray)), "-"],
    ]  # fmt: skip
    notes = (
        f"Nodes: `ray start` worker nodes on this machine ({os.cpu_count()} cores shared by "
        f"all of them and the driver), {SLOTS} slots and {SLOTS} Ray CPUs each, a head with no "
        f"CPUs; {reps} repetition(s) after one untimed round of each side, sides in turn "
        f"({order_text(2)}), each ratio MegaFlow / Ray within a repetition, median "
        "(min-max). Both sides do the same sandbox work per task: create, the command, the "
        "agent's look for a `.git` above the workdir (none, so no `git diff`), destroy. "
        "MegaFlow runs every task through the scheduler, the "
        "builtin agent and the model client in the driver and each sandbox call over gRPC to "
        "the node's agent (no-op: the `dummy` runtime, in memory; sandboxed: `local`, a "
        "bubblewrap sandbox per task); the Ray peer runs only the task body (no state machine, "
        "agent, model or stored result), its worker processes and their runtimes started "
        "before the timer. Per-node scaling on one machine measures the cost of more "
        "processes on the same cores, not the gain of more machines; the control row puts "
        "all the slots on one node, so slot count and node count can be told apart. Lost "
        f"node: {loss_reps} kill(s) per side, the order alternating, each trial on {k} live "
        "nodes (a fresh node replaces each killed one between trials, for both sides), the "
        f"same {SLOTS} tasks on the killed node (MegaFlow's scheduler packs them there; Ray's "
        "pinned with soft affinity), the same endpoint: the task's command starting again in "
        "a new sandbox on a survivor (MegaFlow: the retried attempt's step start in its "
        "trajectory, with the fleet's poll_s 0.5 s and lost_after_s 3 s; Ray: the retried "
        "function's mark before its command, its workers and runtimes warmed on every node "
        "first). The ratio is MegaFlow / Ray of the medians, kill by kill."
    )
    report(
        "fleet",
        "Ray fleet on loopback: tasks per second by node count, and a lost node",
        ["workload", "MegaFlow fleet: {type: ray}", "peer: plain Ray tasks", "MegaFlow / Ray"],
        rows,
        notes,
        load_before=LOAD_AT_START,
        self_loading="Ray nodes (a raylet and a worker process per slot each) and sandboxes",
        args=args,
        reps=reps,
    )


if __name__ == "__main__":
    main()

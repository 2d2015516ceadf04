"""gRPC overhead: exec round trips and control-plane throughput, remote against in-process.

- exec round trip: ``sandbox.exec(["true"])`` on the real ``local`` runtime,
  called in-process (the peer) and through a ``megaflow serve environment``
  process on loopback (``GrpcRuntime``); the same against the ``dummy``
  runtime isolates the RPC cost from the sandbox's own;
- control plane: no-op tasks per second from submit until every task is
  terminal, through a ``megaflow serve scheduler`` process
  (``GrpcControlPlane``) against the embedded scheduler in this process.

Both servers run in their own process with a bearer token, as in a cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ab import ratios, spread
from megaflow.core.tasks import RunSpec, TaskSpec
from megaflow.environment.abstract import EnvironmentSpec, Runtime
from megaflow.environment.config import LocalRuntimeConfig
from megaflow.environment.dummy import DummyRuntime
from megaflow.environment.local import LocalRuntime
from megaflow.rpc.auth import generate_token, write_token
from megaflow.rpc.config import RESERVED_PORTS, ClusterConfig
from megaflow.rpc.environment_client import GrpcRuntime
from megaflow.rpc.health import check_health
from megaflow.rpc.scheduler_client import GrpcControlPlane
from megaflow.scheduler.config import SchedulerConfig
from megaflow.scheduler.control import ControlPlane, LocalControlPlane
from megaflow.scheduler.service import Scheduler
from megaflow.scheduler.synthetic import NoopExecutor
from megaflow.storage.config import StorageConfig
from megaflow.storage.factory import Stores
from report import LOAD_AT_START, report

CLI = [sys.executable, "-c", "from megaflow.cli.main import main; main()"]


def free_port() -> int:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in RESERVED_PORTS:
            return port


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def ms(x: float) -> str:
    return f"{x * 1000:.2f} ms"


class Server:
    """``megaflow serve SERVICE`` in a child process, stopped on exit."""

    def __init__(self, tmp: Path, service: str, runtime: str) -> None:
        self.token = generate_token()
        write_token(tmp / "token", self.token)
        data = {
            "state_dir": str(tmp / "state"),
            "auth": {"token_file": str(tmp / "token")},
            "scheduler": {
                "port": free_port(),
                "executor": "noop",
                "config": {"max_concurrency": 64},
                "storage": {"metadata": {"type": "sqlite", "path": str(tmp / "meta.db")}},
            },
            "environment": {
                "port": free_port(),
                "runtime": {
                    "type": runtime,
                    **({"root": str(tmp / "sb")} if runtime == "local" else {}),
                },
            },
        }
        self.cfg = ClusterConfig.model_validate(data)
        path = tmp / f"{service}.yaml"
        path.write_text(yaml.safe_dump(data))
        self.service = service
        self.proc = subprocess.Popen(
            [*CLI, "serve", service, "--config", str(path)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    @property
    def target(self) -> str:
        return self.cfg.endpoint(self.service).target  # type: ignore[arg-type]

    async def __aenter__(self) -> Server:
        await check_health(self.cfg, self.service, self.token, 60)  # type: ignore[arg-type]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(30)


async def exec_times(a: Runtime, b: Runtime, n: int) -> tuple[list[float], list[float]]:
    """Exec round trips on a sandbox of each runtime, interleaved call by call."""
    async with await a.create(EnvironmentSpec()) as sa, await b.create(EnvironmentSpec()) as sb:
        for _ in range(5):
            await sa.exec(["true"])
            await sb.exec(["true"])
        out: tuple[list[float], list[float]] = ([], [])
        for _ in range(n):
            for box, times in ((sa, out[0]), (sb, out[1])):
                t0 = time.perf_counter()
                await box.exec(["true"])
                times.append(time.perf_counter() - t0)
        return out


async def throughput(cp: ControlPlane, n: int, run_id: str) -> float:
    tasks = [TaskSpec(id=f"{run_id}-{i}", run_id=run_id) for i in range(n)]
    t0 = time.perf_counter()
    await cp.submit_run(RunSpec(id=run_id, name=run_id), tasks)
    status = await cp.wait(run_id)
    elapsed = time.perf_counter() - t0
    if not (status.done and status.total == n):
        raise RuntimeError(f"run {run_id} did not finish all {n} tasks: {status}")
    return n / elapsed


def tps_row(name: str, runs: list[float]) -> list[str]:
    """Median tasks per second in the P50 column, the range in the P99 column."""
    lo_hi = f"{min(runs):,.0f}-{max(runs):,.0f}"
    return [name, f"{statistics.median(runs):,.0f}", lo_hi, str(len(runs))]


async def main(n_exec: int, n_tasks: int, repeats: int) -> None:
    rows: list[list[str]] = []
    medians: dict[str, float] = {}

    def exec_row(name: str, key: str, times: list[float]) -> None:
        medians[key] = statistics.median(times)
        rows.append([name, ms(pct(times, 50)), ms(pct(times, 99)), str(len(times))])

    with tempfile.TemporaryDirectory(prefix="mf-bench-rpc-") as d:
        tmp = Path(d)
        # Throughput first, in a fresh process (after the exec rows its event loop runs
        # measurably slower); embedded and remote interleaved, both started before timing.
        (tmp / "sched").mkdir()
        cfg = StorageConfig.model_validate(
            {"metadata": {"type": "sqlite", "path": str(tmp / "e.db")}}
        )
        embedded: list[float] = []
        remote_tps: list[float] = []
        srv = Server(tmp / "sched", "scheduler", "dummy")
        async with (
            Stores.from_config(cfg) as stores,
            srv,
            GrpcControlPlane(srv.target, srv.token) as cp,
        ):
            sched = Scheduler(SchedulerConfig(max_concurrency=64), stores, NoopExecutor())
            async with sched:
                local_cp = LocalControlPlane(sched)
                for i in range(repeats):
                    embedded.append(await throughput(local_cp, n_tasks, f"embedded-{i}"))
                    remote_tps.append(await throughput(cp, n_tasks, f"remote-{i}"))
        for runtime in ("local", "dummy"):
            sub = tmp / runtime
            sub.mkdir()
            inproc: Runtime = (
                LocalRuntime(LocalRuntimeConfig(root=str(sub / "inproc")))
                if runtime == "local"
                else DummyRuntime()
            )
            srv = Server(sub, "environment", runtime)
            async with inproc, srv, GrpcRuntime(srv.target, srv.token) as remote:
                near, far = await exec_times(inproc, remote, n_exec)
            exec_row(
                f"exec `true`, {runtime} runtime, in-process (peer)", f"{runtime} in-process", near
            )
            exec_row(f"exec `true`, {runtime} runtime, gRPC", f"{runtime} gRPC", far)
    rows.append(tps_row(f"no-op tasks/s, embedded scheduler (peer), {n_tasks} tasks", embedded))
    rows.append(tps_row(f"no-op tasks/s, scheduler service over gRPC, {n_tasks} tasks", remote_tps))
    added = medians["local gRPC"] - medians["local in-process"]
    rpc_cost = medians["dummy gRPC"] - medians["dummy in-process"]
    notes = (
        f"The RPC itself costs {rpc_cost * 1000:.2f} ms per exec at P50 (dummy rows); on the "
        f"local runtime gRPC changes the exec P50 by {added * 1000:+.2f} ms. Each service runs "
        f"in its own process on the caller's machine ({os.cpu_count()} cores); the embedded "
        "peer runs in this process. Exec rows alternate in-process and gRPC call by call on "
        "one sandbox each; throughput runs alternate embedded and remote, "
        f"{len(embedded)} of each, both started before any timing, from submit until every "
        "task is terminal. Throughput rows: median tasks per second in the P50 column, the "
        f"range in the P99 column; remote / embedded, pair by pair: "
        f"{spread(ratios(remote_tps, embedded))}."
    )
    report(
        "rpc",
        "gRPC services against in-process calls",
        ["figure", "P50", "P99", "n"],
        rows,
        notes,
        load_before=LOAD_AT_START,
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--execs", type=int, default=300, help="exec round trips per row")
    ap.add_argument("--tasks", type=int, default=500, help="no-op tasks per throughput row")
    ap.add_argument(
        "--repeats", type=int, default=3, help="interleaved runs per throughput row (>= 3)"
    )
    ap.add_argument("--quick", action="store_true", help="a short run (100 execs, 200 tasks)")
    args = ap.parse_args()
    if args.quick:
        args.execs, args.tasks, args.repeats = 100, 200, 3
    asyncio.run(main(args.execs, args.tasks, max(3, args.repeats)))

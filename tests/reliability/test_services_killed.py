"""SIGKILL of a served environment, agent, scheduler or model service mid-run.

Each service runs as ``megaflow serve SERVICE --config cluster.yaml`` in its
own process; the test is its client. After the kill the client sees a
``TransportError`` ("service unreachable"), an infrastructure error; a new
service process on the same port takes over, and the run finishes with every
task in exactly one terminal state.
"""

from __future__ import annotations

import asyncio
import secrets
import sqlite3
from pathlib import Path

import pytest

from megaflow.app.job import Job
from megaflow.config import parse_config
from megaflow.core.errors import TransportError
from megaflow.core.states import ACTIVE_STATES, TaskState
from megaflow.core.tasks import ErrorKind, RunSpec, TaskSpec
from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.config import PoolConfig
from megaflow.environment.pool import SandboxPool
from megaflow.rpc.agent_service import GrpcTaskExecutor
from megaflow.rpc.environment_client import GrpcRuntime
from megaflow.rpc.scheduler_client import GrpcControlPlane
from megaflow.scheduler import Scheduler, SchedulerConfig
from megaflow.storage.factory import Stores
from megaflow.storage.local_artifacts import LocalArtifactStore
from megaflow.storage.memory_bus import MemoryEventBus
from megaflow.storage.memory_queue import MemoryTaskQueue
from megaflow.storage.sqlite import SqliteMetadataStore
from tests.fixtures.servers import free_port
from tests.reliability.conftest import LeakCheck
from tests.reliability.faults import SandboxTaskExecutor
from tests.reliability.jobs import inline_job, openai_model
from tests.reliability.ledger import check_ledger, integrity_check, ledger_of, read_ledger
from tests.reliability.services import served
from tests.scheduler.helpers import until


def counts_in(db: Path) -> dict[str, int]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return dict(conn.execute("SELECT state, count(*) FROM tasks GROUP BY state").fetchall())
    except sqlite3.OperationalError:
        return {}
    finally:
        conn.close()


def local_stores(tmp: Path) -> Stores:
    return Stores(
        metadata=SqliteMetadataStore(tmp / "m.db"), queue=MemoryTaskQueue(),
        events=MemoryEventBus(), artifacts=LocalArtifactStore(tmp / "art"),
    )  # fmt: skip


@pytest.mark.slow
async def test_environment_service_killed_mid_run(tmp_path: Path, leaks: LeakCheck) -> None:
    port = free_port()
    cfg = {
        "auth": {"token": secrets.token_urlsafe(16)},
        "state_dir": str(tmp_path / "state"),
        "environment": {"port": port, "runtime": {"type": "local", "root": str(tmp_path / "sb")}},
    }
    stores = local_stores(tmp_path)
    run = RunSpec(id="env-kill", name="env-kill")
    n = 8
    tasks = [
        TaskSpec(id=f"t{i}", run_id=run.id, max_attempts=8,
                 payload={"command": "sleep 1; echo ok"})
        for i in range(n)
    ]  # fmt: skip
    sched_cfg = SchedulerConfig(max_concurrency=2, retry={"base_s": 0.3, "max_s": 2.0})
    with served(tmp_path, cfg) as svc:
        first = await svc.start("environment")
        leaks.watch(first.pid)
        runtime = GrpcRuntime(f"127.0.0.1:{port}", svc.token)
        pool = SandboxPool(runtime, "ephemeral", PoolConfig(warm_share=0))
        executor = SandboxTaskExecutor(pool, EnvironmentSpec(image="host"))
        async with stores:
            sched = Scheduler(sched_cfg, stores, executor, seed=1)
            await sched.start()
            try:
                await sched.submit(run, tasks)

                def mid_run() -> bool:
                    c = sched.counts(run.id)
                    return c.get(TaskState.SUCCEEDED, 0) >= 2 and c.get(TaskState.RUNNING, 0) >= 1

                await until(mid_run, 60)
                svc.kill(first)  # the service and its sandboxes die
                second = await svc.start("environment")  # same port; reaps the orphans
                leaks.watch(second.pid)
                counts = await asyncio.wait_for(sched.wait(run.id), 120)
            finally:
                await sched.stop()
                await pool.stop()
                await runtime.stop()
            led = await read_ledger(stores.metadata, run.id)

    assert counts == {TaskState.SUCCEEDED: n}
    check_ledger(led, n)
    lost = [a for atts in led.attempts.values() for a in atts if a.error_kind is ErrorKind.INFRA]
    assert lost, "no attempt saw the service die"
    assert all("environment service" in (a.error or "") for a in lost), lost
    assert any("unreachable" in (a.error or "") for a in lost), lost
    assert all(r.success for r in led.results.values())
    assert integrity_check(tmp_path / "m.db") == "ok"


@pytest.mark.slow
async def test_agent_service_killed_mid_run(tmp_path: Path, leaks: LeakCheck) -> None:
    port = free_port()
    cfg = {
        "auth": {"token": secrets.token_urlsafe(16)},
        "state_dir": str(tmp_path / "state"),
        "agent": {"port": port, "executor": "sleep"},
    }
    run = RunSpec(id="agent-kill", name="agent-kill")
    n = 10
    tasks = [
        TaskSpec(id=f"t{i}", run_id=run.id, max_attempts=8, payload={"sleep_s": 0.5})
        for i in range(n)
    ]
    sched_cfg = SchedulerConfig(max_concurrency=2, retry={"base_s": 0.3, "max_s": 2.0})
    stores = local_stores(tmp_path)
    with served(tmp_path, cfg) as svc:
        first = await svc.start("agent")
        executor = GrpcTaskExecutor(f"127.0.0.1:{port}", svc.token)
        async with stores:
            sched = Scheduler(sched_cfg, stores, executor, seed=1)
            await sched.start()
            try:
                await sched.submit(run, tasks)

                def mid_run() -> bool:
                    c = sched.counts(run.id)
                    return c.get(TaskState.SUCCEEDED, 0) >= 2 and c.get(TaskState.RUNNING, 0) >= 1

                await until(mid_run, 60)
                svc.kill(first)
                await svc.start("agent")
                counts = await asyncio.wait_for(sched.wait(run.id), 120)
            finally:
                await sched.stop()
            led = await read_ledger(stores.metadata, run.id)

    assert counts == {TaskState.SUCCEEDED: n}
    check_ledger(led, n)
    lost = [a for atts in led.attempts.values() for a in atts if a.error_kind is ErrorKind.INFRA]
    assert lost, "no attempt saw the service die"
    assert all("agent service" in (a.error or "") for a in lost), lost
    assert integrity_check(tmp_path / "m.db") == "ok"


@pytest.mark.slow
async def test_scheduler_service_killed_mid_run(tmp_path: Path, leaks: LeakCheck) -> None:
    port = free_port()
    db = tmp_path / "sched.db"
    cfg = {
        "auth": {"token": secrets.token_urlsafe(16)},
        "state_dir": str(tmp_path / "state"),
        "scheduler": {
            "port": port,
            "executor": "sleep",
            "config": {"max_concurrency": 2},
            "storage": {
                "metadata": {"type": "sqlite", "path": str(db)},
                "artifacts": {"type": "local", "root": str(tmp_path / "art")},
            },
        },
    }
    run = RunSpec(id="sched-kill", name="sched-kill")
    n = 12
    tasks = [TaskSpec(id=f"t{i}", run_id=run.id, payload={"sleep_s": 0.4}) for i in range(n)]
    with served(tmp_path, cfg) as svc:
        first = await svc.start("scheduler")
        async with GrpcControlPlane(f"127.0.0.1:{port}", svc.token) as cp:
            await cp.submit_run(run, tasks)
            waiting = asyncio.create_task(cp.wait(run.id))

            def mid_run() -> bool:
                c = counts_in(db)
                active = sum(c.get(s.value, 0) for s in ACTIVE_STATES)
                return c.get("succeeded", 0) >= 3 and active >= 1

            await until(mid_run, 60)
            svc.kill(first)
            before = await ledger_of(db, run.id)
            # what a client sees: a clear infrastructure error, on a call in
            # progress and on a new one
            with pytest.raises(TransportError, match="unreachable"):
                await waiting
            with pytest.raises(TransportError, match="scheduler service"):
                await cp.get_run(run.id)
            await svc.start("scheduler")  # resumes every run in its store
            status = None
            for _ in range(100):  # a client retries infrastructure errors
                try:
                    status = await cp.wait(run.id)
                    break
                except TransportError:
                    await asyncio.sleep(0.2)
    assert status is not None
    assert status.done
    assert status.counts == {TaskState.SUCCEEDED: n}
    after = await ledger_of(db, run.id)
    check_ledger(after, n)
    done = {t for t, r in before.tasks.items() if r.state.terminal}
    in_flight = {t for t, r in before.tasks.items() if r.state.active}
    assert done
    assert in_flight
    for tid in done:  # not run again
        assert after.attempts[tid] == before.attempts[tid]
    for tid in in_flight:
        kinds = [a.error_kind for a in after.attempts[tid]]
        assert kinds[-2:] == [ErrorKind.INFRA_LOST, None], (tid, kinds)
    assert integrity_check(db) == "ok"


@pytest.mark.slow
async def test_model_service_killed_mid_run(
    tmp_path: Path, leaks: LeakCheck, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = secrets.token_urlsafe(16)
    http_port = free_port()
    cfg = {
        "auth": {"token": token},
        "state_dir": str(tmp_path / "state"),
        "model": {"port": free_port(), "http_port": http_port,
                  "config": {"type": "replay", "play": "empty"}},
    }  # fmt: skip
    monkeypatch.setenv("RELIABILITY_MODEL_TOKEN", token)
    model = openai_model(
        f"http://127.0.0.1:{http_port}/v1", model="replay-empty",
        api_key_env="RELIABILITY_MODEL_TOKEN",
    )  # fmt: skip
    n = 10
    job_cfg = inline_job(tmp_path, model, n=n, max_attempts=8)
    job_cfg["scheduler"]["retry"] = {"base_s": 0.3, "max_s": 2.0}
    with served(tmp_path, cfg) as svc:
        first = await svc.start("model")
        async with Job(parse_config(job_cfg)) as job:
            await job.submit()
            sched = job.sched
            await until(lambda: sched.counts(job.run_id).get(TaskState.SUCCEEDED, 0) >= 2, 60)
            svc.kill(first)
            # a task that reaches the model now finds it gone: an infra failure
            await until(lambda: any(sched.failures.values()), 60)
            await svc.start("model")
            counts = await asyncio.wait_for(job.wait(), 120)
            led = await read_ledger(job.stores.metadata, job.run_id)

    assert counts[job.run_id] == {TaskState.SUCCEEDED: n}
    check_ledger(led, n)
    lost = [a for atts in led.attempts.values() for a in atts if a.error_kind is ErrorKind.INFRA]
    assert lost
    assert all("unreachable" in (a.error or "") for a in lost), lost
    assert all(r.success for r in led.results.values())

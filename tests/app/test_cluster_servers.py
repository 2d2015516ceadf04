"""The bundled quickstart set on `megaflow up` with PostgreSQL, Redis and S3 behind it.

Every service runs in its own process; the scheduler's stores (and the agent
service's, which reads run configs and writes artifacts) are a real
PostgreSQL, a real redis-server and an S3 server (moto). Results must match
the embedded run; the run must also survive the environment service and the
Redis server being killed mid-run.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from megaflow.app.launcher import members
from megaflow.core.states import TaskState
from megaflow.rpc.config import ClusterConfig
from megaflow.rpc.health import check_health
from megaflow.rpc.scheduler_client import GrpcControlPlane
from megaflow.storage.abstract import MetadataStore
from megaflow.storage.postgres import PostgresMetadataStore
from megaflow.storage.sqlite import SqliteMetadataStore
from tests.app.test_cluster import CLI, megaflow, run_config, stop_all
from tests.fixtures.servers import free_port, start_redis, stop

pytestmark = [pytest.mark.slow, pytest.mark.services]
Outcomes = dict[tuple[str, str], tuple[bool, float]]


async def outcomes_of(store: MetadataStore, run_ids: set[str] | None = None) -> Outcomes:
    out = {}
    async with store:
        for run in await store.list_runs():
            if run_ids is not None and run.id not in run_ids:
                continue
            for res in await store.list_results(run.id):
                key = (run.labels.get("arm", "main"), res.task_id.split("/", 1)[1])
                out[key] = (res.success, res.reward)
    return out


@dataclass
class ServerCluster:
    path: Path
    cfg: ClusterConfig
    token: str
    dsn: str
    schema: str
    redis: subprocess.Popen[bytes]
    redis_port: int
    redis_dir: Path

    def store(self) -> PostgresMetadataStore:
        return PostgresMetadataStore(self.dsn, schema=self.schema)

    def submit(self, run_yaml: Path, *extra: str) -> subprocess.CompletedProcess[str]:
        return megaflow(
            "submit", str(run_yaml), "--cluster", self.cfg.scheduler.target,
            "--token-file", str(self.cfg.auth.token_file), *extra, cwd=self.path.parent,
        )  # fmt: skip


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, postgres_server: Any, moto_server: str
) -> Iterator[ServerCluster]:
    root = tmp_path_factory.mktemp("server-cluster")
    state = root / "state"
    redis_port = free_port()
    redis = start_redis(root / "redis", redis_port)
    schema = f"c{uuid.uuid4().hex[:8]}"
    redis_url = f"redis://127.0.0.1:{redis_port}/0"
    data: dict[str, Any] = {
        "state_dir": str(state),
        "auth": {"token_file": str(state / "token")},
        "scheduler": {
            "port": free_port(),
            "executor": "agent",
            "config": {"max_concurrency": 4, "retry": {"base_s": 0.2, "max_s": 1.0}},
            "storage": {
                "metadata": {"type": "postgres", "dsn": postgres_server.dsn, "db_schema": schema},
                "queue": {"type": "redis", "url": redis_url, "namespace": schema},
                "events": {"type": "redis", "url": redis_url, "namespace": schema},
                "artifacts": {
                    "type": "s3", "bucket": f"mf-{schema}", "endpoint_url": moto_server,
                    "region": "us-east-1", "access_key_id": "testing",
                    "secret_access_key": "testing", "create_bucket": True,
                },
            },
        },
        "environment": {
            "port": free_port(), "runtime": {"type": "local", "root": str(state / "sb")},
        },
        "agent": {"port": free_port()},
        "model": {"port": free_port(), "http_port": free_port()},
    }  # fmt: skip
    path = root / "cluster.yaml"
    path.write_text(yaml.safe_dump(data))
    up = megaflow("up", str(path), cwd=root)
    assert up.returncode == 0, up.stdout + up.stderr
    cfg = ClusterConfig.model_validate(data)
    box = ServerCluster(
        path, cfg, cfg.auth.resolve(), postgres_server.dsn, schema, redis, redis_port,
        root / "redis",
    )  # fmt: skip
    try:
        yield box
    finally:
        megaflow("down", str(path), cwd=root)
        stop(box.redis)


def test_quickstart_set_on_servers_matches_the_embedded_run(
    cluster: ServerCluster, tmp_path: Path
) -> None:
    # 12 of the 34 tasks: every one is graded gold and empty in tests/datasets/test_bundled_set.py
    run_yaml = run_config(tmp_path, limit=12, control=True, samples=2)
    embedded = megaflow("run", str(run_yaml), cwd=tmp_path)
    assert embedded.returncode == 0, embedded.stdout + embedded.stderr
    before = set(asyncio.run(outcomes_of(cluster.store())))

    submitted = cluster.submit(run_yaml, "--wait")
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr

    want = asyncio.run(outcomes_of(SqliteMetadataStore(str(tmp_path / "embedded.db"))))
    got = {k: v for k, v in asyncio.run(outcomes_of(cluster.store())).items() if k not in before}
    assert len(want) == 48  # 12 tasks x 2 samples, gold and control
    assert got == want
    assert {arm: ok for (arm, _), (ok, _) in want.items()} == {"main": True, "control": False}


async def _wait_running(cp: GrpcControlPlane, run_id: str) -> None:
    for _ in range(600):
        if TaskState.RUNNING in (await cp.get_run(run_id)).counts:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("no task started running")


def _check_complete(cluster: ServerCluster, run_id: str, n: int) -> list[Any]:
    async def records() -> tuple[list[Any], list[Any]]:
        async with cluster.store() as md:
            return await md.list_tasks(run_id), await md.list_results(run_id)

    tasks, results = asyncio.run(records())
    assert len(tasks) == n
    assert sorted(r.task_id for r in results) == sorted(t.id for t in tasks)  # none lost or doubled
    assert all(r.success for r in results)
    return tasks


def test_redis_restarted_mid_run(cluster: ServerCluster, tmp_path: Path) -> None:
    submitted = cluster.submit(run_config(tmp_path, limit=6, control=False, max_attempts=20))
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    run_id = submitted.stdout.split("submitted run ", 1)[1].split(":", 1)[0]

    async def go() -> None:
        async with GrpcControlPlane(cluster.cfg.scheduler.target, cluster.token) as cp:
            await _wait_running(cp, run_id)
            cluster.redis.kill()  # SIGKILL: no save, and the server comes back empty
            cluster.redis.wait(10)
            cluster.redis = start_redis(cluster.redis_dir, cluster.redis_port)
            status = await asyncio.wait_for(cp.wait(run_id), timeout=240)
            assert status.counts == {TaskState.SUCCEEDED: status.total}

    asyncio.run(go())
    _check_complete(cluster, run_id, 6)


def test_environment_service_killed_mid_run(cluster: ServerCluster, tmp_path: Path) -> None:
    # Last in the module: the environment service it restarts is stopped at its end.
    submitted = cluster.submit(run_config(tmp_path, limit=6, control=False, max_attempts=20))
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    run_id = submitted.stdout.split("submitted run ", 1)[1].split(":", 1)[0]

    started: list[subprocess.Popen[bytes]] = []

    async def go() -> None:
        async with GrpcControlPlane(cluster.cfg.scheduler.target, cluster.token) as cp:
            await _wait_running(cp, run_id)
            env = next(
                m for m in members(Path(cluster.cfg.state_dir)) if m.service == "environment"
            )
            os.kill(env.pid, signal.SIGKILL)
            with (tmp_path / "env2.log").open("ab") as log:
                proc = subprocess.Popen(
                    [*CLI, "serve", "environment", "--config", str(cluster.path)],
                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                )  # fmt: skip
            started.append(proc)
            await check_health(cluster.cfg, "environment", cluster.token, timeout=60)
            status = await asyncio.wait_for(cp.wait(run_id), timeout=240)
            if status.counts != {TaskState.SUCCEEDED: status.total}:
                tasks = await cp.list_tasks(run_id)
                raise AssertionError(f"{status.counts}: {[(t.id, t.error) for t in tasks]}")

    try:
        asyncio.run(go())
        tasks = _check_complete(cluster, run_id, 6)
        assert max(t.attempts for t in tasks) >= 2  # the kill hit an attempt, which was retried
    finally:
        stop_all(started)

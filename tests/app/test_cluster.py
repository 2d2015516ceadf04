"""Runs on a local cluster (`megaflow up`, one process per service) against the embedded run.

One cluster serves the module: the bundled mini-SWE set must give the
embedded run's results, and a run must complete with no task lost or counted
twice when the environment service is killed with SIGKILL mid-run and
restarted.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
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
from megaflow.storage.sqlite import SqliteMetadataStore
from tests.fixtures.servers import free_port

pytestmark = pytest.mark.slow

CLI = [sys.executable, "-c", "from megaflow.cli.main import main; main()"]
TASKS = Path(__file__).resolve().parents[2] / "tasks" / "mini-swe"


def megaflow(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(
        [*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=env
    )


async def _outcomes(db: Path) -> dict[tuple[str, str], tuple[bool, float]]:
    out = {}
    async with SqliteMetadataStore(str(db)) as md:
        for run in await md.list_runs():
            for res in await md.list_results(run.id):
                key = (run.labels.get("arm", "main"), res.task_id.split("/", 1)[1])
                out[key] = (res.success, res.reward)
    return out


def outcomes(db: Path) -> dict[tuple[str, str], tuple[bool, float]]:
    """(arm, task without its run id) -> (success, reward), for every run in ``db``."""
    return asyncio.run(_outcomes(db))


@dataclass
class Cluster:
    path: Path
    cfg: ClusterConfig
    token: str

    @property
    def db(self) -> Path:
        return Path(self.cfg.state_dir) / "meta.db"

    def submit(self, run_yaml: Path, *extra: str) -> subprocess.CompletedProcess[str]:
        return megaflow(
            "submit", str(run_yaml), "--cluster", self.cfg.scheduler.target,
            "--token-file", str(self.cfg.auth.token_file), *extra, cwd=self.path.parent,
        )  # fmt: skip


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("cluster")
    state = root / "state"
    data: dict[str, Any] = {
        "state_dir": str(state),
        "auth": {"token_file": str(state / "token")},
        "scheduler": {
            "port": free_port(),
            "executor": "agent",
            "config": {"max_concurrency": 2, "retry": {"base_s": 0.2, "max_s": 1.0}},
            "storage": {
                "metadata": {"type": "sqlite", "path": str(state / "meta.db")},
                "artifacts": {"type": "local", "root": str(state / "artifacts")},
            },
        },
        "environment": {
            "port": free_port(),
            "runtime": {"type": "local", "root": str(state / "sb")},
        },
        "agent": {"port": free_port()},
        "model": {"port": free_port(), "http_port": free_port()},
    }
    path = root / "cluster.yaml"
    path.write_text(yaml.safe_dump(data))
    up = megaflow("up", str(path), cwd=root)
    assert up.returncode == 0, up.stdout + up.stderr
    cfg = ClusterConfig.model_validate(data)
    try:
        yield Cluster(path, cfg, cfg.auth.resolve())
    finally:
        megaflow("down", str(path), cwd=root)


def run_config(tmp_path: Path, limit: int | None, control: bool, **extra: Any) -> Path:
    run: dict[str, Any] = {
        "name": "mini",
        "samples": 1,
        "tasks": {"type": "swebench", "path": str(TASKS), "limit": limit},
        "agent": {"type": "builtin", "max_steps": 10},
        "model": {"type": "replay", "play": "gold"},
        "environment": {"runtime": {"type": "local", "root": str(tmp_path / "sb")}},
        "storage": {
            "metadata": {"type": "sqlite", "path": str(tmp_path / "embedded.db")},
            "artifacts": {"type": "local", "root": str(tmp_path / "artifacts")},
        },
        **extra,
    }
    if control:
        run["control"] = {"model": {"type": "replay", "play": "empty"}}
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(run))
    return path


def test_cluster_run_matches_the_embedded_run(cluster: Cluster, tmp_path: Path) -> None:
    run_yaml = run_config(tmp_path, limit=2, control=True)
    embedded = megaflow("run", str(run_yaml), cwd=tmp_path)
    assert embedded.returncode == 0, embedded.stdout + embedded.stderr
    before = set(outcomes(cluster.db))

    submitted = cluster.submit(run_yaml, "--wait")
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr

    want = outcomes(tmp_path / "embedded.db")
    got = {k: v for k, v in outcomes(cluster.db).items() if k not in before}
    assert len(want) == 4
    assert got == want
    assert {arm: ok for (arm, _), (ok, _) in want.items()} == {"main": True, "control": False}
    artifacts = Path(cluster.cfg.state_dir) / "artifacts" / "runs"
    assert len(list(artifacts.glob("*/tasks/**/attempt-1/grade.json"))) == 4


def stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    """Stop the services a test started itself, also when it failed midway."""
    for proc in procs:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def _kill_environment_mid_run(
    cluster: Cluster, run_id: str, root: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    """SIGKILL the environment service while tasks run and start a new one
    (added to ``started``, for the caller to stop)."""
    async with GrpcControlPlane(cluster.cfg.scheduler.target, cluster.token) as cp:
        for _ in range(600):
            if TaskState.RUNNING in (await cp.get_run(run_id)).counts:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("no task started running")
        env = next(m for m in members(Path(cluster.cfg.state_dir)) if m.service == "environment")
        os.kill(env.pid, signal.SIGKILL)
        with (root / "env2.log").open("ab") as log:
            proc = subprocess.Popen(
                [*CLI, "serve", "environment", "--config", str(cluster.path)],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        started.append(proc)
        await check_health(cluster.cfg, "environment", cluster.token, timeout=60)
        status = await asyncio.wait_for(cp.wait(run_id), timeout=240)
        assert status.counts == {TaskState.SUCCEEDED: status.total}


def test_environment_service_killed_mid_run(cluster: Cluster, tmp_path: Path) -> None:
    run_yaml = run_config(tmp_path, limit=6, control=False, max_attempts=20)
    submitted = cluster.submit(run_yaml)
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    run_id = submitted.stdout.split("submitted run ", 1)[1].split(":", 1)[0]
    started: list[subprocess.Popen[bytes]] = []
    try:
        asyncio.run(_kill_environment_mid_run(cluster, run_id, tmp_path, started))
    finally:
        stop_all(started)

    async def records() -> tuple[list[Any], list[Any]]:
        async with SqliteMetadataStore(str(cluster.db)) as md:
            return await md.list_tasks(run_id), await md.list_results(run_id)

    tasks, results = asyncio.run(records())
    assert len(tasks) == 6
    assert sorted(r.task_id for r in results) == sorted(t.id for t in tasks)  # none lost or doubled
    assert all(r.success for r in results)
    assert max(t.attempts for t in tasks) >= 2  # the kill hit an attempt, which was retried

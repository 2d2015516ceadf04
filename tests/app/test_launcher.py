"""`megaflow up | submit | status --cluster | down` on a real local cluster."""

from __future__ import annotations

import asyncio
import os
import ssl
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from megaflow.app.launcher import members
from megaflow.cli.main import app
from megaflow.core.states import TaskState
from megaflow.core.tasks import RunSpec, TaskSpec
from megaflow.rpc.config import SERVABLE, ClusterConfig
from megaflow.rpc.health import check_health
from megaflow.rpc.scheduler_client import GrpcControlPlane
from tests.fixtures.servers import free_port
from tests.rpc.test_environment_grpc import _self_signed

CLI = [sys.executable, "-c", "from megaflow.cli.main import main; main()"]


def megaflow(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=120,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )  # fmt: skip


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Path, int, int]]:
    sched_port, http_port = free_port(), free_port()
    cfg = {
        "state_dir": str(tmp_path / "state"),
        "auth": {"token_file": str(tmp_path / "state" / "token")},
        "scheduler": {
            "port": sched_port,
            "executor": "agent",
            "storage": {"metadata": {"type": "sqlite", "path": str(tmp_path / "meta.db")}},
        },
        "environment": {"port": free_port(), "runtime": {"type": "dummy"}},
        "agent": {"port": free_port(), "executor": "noop"},
        "model": {"port": free_port(), "http_port": http_port},
        "tls": _self_signed(tmp_path).model_dump(),
    }
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(cfg))
    try:
        yield path, sched_port, http_port
    finally:
        megaflow("down", str(path), cwd=tmp_path)


@pytest.mark.slow
def test_up_submit_status_down(cluster: tuple[Path, int, int], tmp_path: Path) -> None:
    path, port, http_port = cluster
    up = megaflow("up", str(path), cwd=tmp_path)
    assert up.returncode == 0, up.stdout + up.stderr
    for service in ("scheduler", "environment", "agent", "model"):
        assert service in up.stdout
    token_file = tmp_path / "state" / "token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "state").stat().st_mode) == 0o700
    for m in members(tmp_path / "state"):
        assert stat.S_IMODE(Path(m.log).stat().st_mode) == 0o600, m.log
    pids = [m.pid for m in members(tmp_path / "state")]
    assert len(pids) == 4
    assert os.getpid() not in pids

    run = tmp_path / "run.yaml"
    run.write_text(
        "name: hello\nsamples: 2\ntasks:\n  type: inline\n  tasks:\n    - id: a\n    - id: b\n"
    )
    ca = str(tmp_path / "server.pem")
    url = f"grpcs://127.0.0.1:{port}"
    plain = megaflow("submit", str(run), "--cluster", f"127.0.0.1:{port}",
                     "--token-file", str(token_file), cwd=tmp_path)  # fmt: skip
    assert plain.returncode != 0, "a plaintext client reached a TLS cluster"
    sub = megaflow("submit", str(run), "--cluster", url, "--ca-file", ca,
                   "--token-file", str(token_file), "--wait", cwd=tmp_path)  # fmt: skip
    assert sub.returncode == 0, sub.stdout + sub.stderr
    assert "4 tasks" in sub.stdout
    assert "graded" in sub.stdout  # the control plane's counts alone: no --cluster-config

    token = token_file.read_text().strip()
    models = f"https://127.0.0.1:{http_port}/v1/models"
    verify = ssl.create_default_context(cafile=ca)
    assert httpx.get(models, verify=verify).status_code == 401
    wrong = {"Authorization": "Bearer nope-nope-nope-nope"}
    assert httpx.get(models, headers=wrong, verify=verify).status_code == 401
    ok = httpx.get(models, headers={"Authorization": f"Bearer {token}"}, verify=verify)
    assert ok.status_code == 200
    assert ok.json()["data"]
    roots = {"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": ca}
    status = megaflow("status", "--cluster", url, cwd=tmp_path,
                      env={"MEGAFLOW_TOKEN": token, **roots})  # fmt: skip
    assert status.returncode == 0, status.stderr
    assert "hello" in status.stdout
    denied = megaflow("status", "--cluster", url, cwd=tmp_path,
                      env={"MEGAFLOW_TOKEN": "x" * 40, **roots})  # fmt: skip
    assert denied.returncode != 0
    assert "bearer token" in denied.stderr

    again = megaflow("up", str(path), cwd=tmp_path)
    assert again.returncode != 0
    assert "already up" in again.stderr

    down = megaflow("down", str(path), cwd=tmp_path)
    assert down.returncode == 0, down.stderr
    assert down.stdout.count("stopped") == 4
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()
    assert members(tmp_path / "state") == []


def test_serve_refuses_unknown_services(tmp_path: Path) -> None:
    bad = CliRunner().invoke(app, ["serve", "teapot"])
    assert bad.exit_code == 2
    assert "unknown service" in bad.output


def test_bad_cluster_config_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text("scheduler:\n  port: 15000\n")
    result = CliRunner().invoke(app, ["up", str(path)])
    assert result.exit_code == 2
    assert "scheduler.port" in result.output
    assert "Ray" in result.output


async def test_serve_all_runs_every_service_in_one_process(tmp_path: Path) -> None:
    data = {
        "auth": {"token": "t" * 32},
        "scheduler": {"port": free_port()},
        "environment": {"port": free_port(), "runtime": {"type": "dummy"}},
        "agent": {"port": free_port(), "executor": "noop"},
        "model": {"port": free_port(), "http_port": free_port()},
    }
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(data))
    cfg = ClusterConfig.model_validate(data)
    proc = subprocess.Popen([*CLI, "serve", "all", "--config", str(path)], cwd=tmp_path)
    try:
        for service in SERVABLE:
            await check_health(cfg, service, "t" * 32, timeout=60)
    finally:
        proc.terminate()
        assert proc.wait(30) == 0  # SIGTERM stops it cleanly


@pytest.mark.slow
async def test_a_restarted_scheduler_service_resumes_its_runs(tmp_path: Path) -> None:
    token = "t" * 32
    data = {
        "auth": {"token": token},
        "scheduler": {
            "port": free_port(),
            "executor": "sleep",
            "config": {"max_concurrency": 1, "retry": {"base_s": 0.1, "max_s": 0.5}},
            "storage": {"metadata": {"type": "sqlite", "path": str(tmp_path / "meta.db")}},
        },
    }
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(data))
    cfg = ClusterConfig.model_validate(data)
    command = [*CLI, "serve", "scheduler", "--config", str(path)]
    first = subprocess.Popen(command, cwd=tmp_path)
    second = None
    try:
        await check_health(cfg, "scheduler", token, timeout=60)
        tasks = [TaskSpec(id=f"t{i}", run_id="r1", payload={"sleep_s": 0.5}) for i in range(4)]
        async with (
            GrpcControlPlane(cfg.scheduler.target, token) as cp,
            await cp.watch(run_id="r1", kinds=["task_finished"]) as finished,
        ):
            await cp.submit_run(RunSpec(id="r1", name="r1"), tasks)
            await asyncio.wait_for(anext(aiter(finished)), timeout=60)  # one done, one running
        first.kill()  # SIGKILL: no chance to clean up
        first.wait()
        second = subprocess.Popen(command, cwd=tmp_path)
        await check_health(cfg, "scheduler", token, timeout=60)
        async with GrpcControlPlane(cfg.scheduler.target, token) as cp:
            status = await asyncio.wait_for(cp.wait("r1"), timeout=60)
            records = await cp.list_tasks("r1")
        assert status.counts == {TaskState.SUCCEEDED: 4}
        assert sorted(r.id for r in records) == ["t0", "t1", "t2", "t3"]
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(30)

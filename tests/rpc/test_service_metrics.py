"""Every served service exposes /metrics behind the cluster's bearer token."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from megaflow.app.serve import serve
from megaflow.core.states import TaskState
from megaflow.core.tasks import RunSpec, TaskSpec
from megaflow.rpc.auth import generate_token
from megaflow.rpc.config import ClusterConfig
from megaflow.rpc.scheduler_client import GrpcControlPlane
from tests.fixtures.servers import free_port


async def test_each_service_serves_its_metrics_with_the_token(tmp_path: Path) -> None:
    ports = {s: (free_port(), free_port()) for s in ("scheduler", "environment", "model")}
    cfg = ClusterConfig.model_validate(
        {
            "scheduler": {
                "port": ports["scheduler"][0], "metrics_port": ports["scheduler"][1],
                "executor": "noop",
                "storage": {"metadata": {"type": "sqlite", "path": str(tmp_path / "m.db")}},
            },
            "environment": {
                "port": ports["environment"][0], "metrics_port": ports["environment"][1],
                "runtime": {"type": "dummy"},
            },
            "model": {
                "port": ports["model"][0], "metrics_port": ports["model"][1],
                "http_port": free_port(),
            },
        }
    )  # fmt: skip
    token = generate_token()
    stop = asyncio.Event()
    ready: list[str] = []
    server = asyncio.create_task(
        serve(["environment", "model", "scheduler"], cfg, token, stop, lambda s, t: ready.append(s))
    )
    try:
        while len(ready) < 3:
            assert not server.done(), server.exception()
            await asyncio.sleep(0.05)
        plane = GrpcControlPlane(cfg.scheduler.target, token)
        await plane.start()
        tasks = [TaskSpec(id=f"m/{i}", run_id="m") for i in range(5)]
        await plane.submit_run(RunSpec(id="m"), tasks)
        assert (await plane.wait("m")).counts == {TaskState.SUCCEEDED: 5}
        await plane.stop()
        async with httpx.AsyncClient() as http:
            expect = {
                "scheduler": 'megaflow_scheduler_tasks{state="succeeded"} 5.0',
                "environment": "megaflow_sandbox_start_seconds",
                "model": "megaflow_model_calls_total 0.0",
            }
            for service, (_, mport) in ports.items():
                url = f"http://127.0.0.1:{mport}/metrics"
                denied = await http.get(url, headers={"Authorization": "Bearer wrong-token"})
                assert denied.status_code == 401
                assert (await http.get(url)).status_code == 401
                ok = await http.get(url, headers={"Authorization": f"Bearer {token}"})
                assert ok.status_code == 200, service
                assert expect[service] in ok.text, (service, ok.text[:2000])
    finally:
        stop.set()
        await server

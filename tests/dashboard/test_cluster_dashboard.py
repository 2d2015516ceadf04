"""The dashboard served by the control plane (a ``dashboard`` entry in the cluster config).

In process: the scheduler service with the dashboard beside it, over its
SQLite store, behind the cluster token; its live pages read the scheduler's
own registry and the environment service's ``metrics_port`` (served apart).
In a browser: ``megaflow serve scheduler`` as an operator starts it, signed in
with the cluster token on the login page; screenshot ``scheduler-cluster.png``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from megaflow.app.serve import serve
from megaflow.cli.cluster_dashboard import serve_cluster
from megaflow.core.errors import ConfigError
from megaflow.core.tasks import RunSpec, TaskSpec
from megaflow.rpc.auth import generate_token
from megaflow.rpc.config import ClusterConfig
from megaflow.rpc.scheduler_client import GrpcControlPlane
from tests.fixtures.servers import free_port

MEGAFLOW = str(Path(sys.executable).parent / "megaflow")


def cluster(tmp: Path) -> dict[str, Any]:
    return {
        "auth": {"token_file": str(tmp / "token")},
        "state_dir": str(tmp / "state"),
        "scheduler": {
            "port": free_port(), "executor": "noop",
            "storage": {"metadata": {"type": "sqlite", "path": str(tmp / "m.db")},
                        "artifacts": {"type": "local", "root": str(tmp / "art")}},
        },
        "environment": {"port": free_port(), "metrics_port": free_port(),
                        "runtime": {"type": "dummy"}},
        "dashboard": {"port": free_port(), "interval_s": 0.2, "train_dir": str(tmp / "train")},
    }  # fmt: skip


async def submit(cfg: ClusterConfig, token: str, run: str, n: int) -> None:
    plane = GrpcControlPlane(cfg.scheduler.target, token)
    await plane.start()
    try:
        await plane.submit_run(
            RunSpec(id=run), [TaskSpec(id=f"{run}/{i}", run_id=run) for i in range(n)]
        )
        await plane.wait(run)
    finally:
        await plane.stop()


async def test_control_plane_serves_the_dashboard(tmp_path: Path) -> None:
    cfg = ClusterConfig.model_validate(cluster(tmp_path))
    token, stop, links = generate_token(), asyncio.Event(), list[str]()
    ready: list[str] = []
    env = asyncio.create_task(
        serve(["environment"], cfg, token, stop, lambda s, t: ready.append(s))
    )
    plane = asyncio.create_task(
        serve_cluster(["scheduler"], cfg, token, stop, lambda s, t: ready.append(s), links.append)
    )
    try:
        while len(ready) < 2 or not links:
            assert not plane.done()
            assert not env.done()
            await asyncio.sleep(0.05)
        await submit(cfg, token, "c", 4)
        assert cfg.dashboard is not None
        base = f"http://127.0.0.1:{cfg.dashboard.port}"
        async with httpx.AsyncClient(base_url=base) as http:
            assert (await http.get("/api/runs")).status_code == 401
            h = {"authorization": f"Bearer {token}"}
            [run] = (await http.get("/api/runs", headers=h)).json()
            assert (run["id"], run["states"]) == ("c", {"succeeded": 4})
            view = (await http.get("/api/scheduler", headers=h)).json()
            assert [s["name"] for s in view["sources"]] == ["this process", "environment"]
            assert all(s["ok"] for s in view["sources"]), view["sources"]
            [row] = view["schedulers"]
            assert row["source"] == "this process"
            assert row["tasks"]["succeeded"] == 4
            assert row["tasks"]["scheduled"] == 0  # the emptied state reads 0, not a stale count
            assert row["decisions"] >= 4
            login = await http.get(links[0].removeprefix(base), follow_redirects=False)
            assert login.status_code == 303
            assert "megaflow_dashboard" in login.cookies
    finally:
        stop.set()
        await asyncio.gather(plane, env)


async def test_a_memory_store_cannot_back_the_dashboard(tmp_path: Path) -> None:
    raw = cluster(tmp_path)
    raw["scheduler"]["storage"]["metadata"] = {"type": "memory"}
    cfg = ClusterConfig.model_validate(raw)
    with pytest.raises(ConfigError, match="dashboard"):
        await serve_cluster(["scheduler"], cfg, generate_token(), asyncio.Event())


def test_cluster_dashboard_in_the_browser(tmp_path: Path, browser: Any, shots: Path) -> None:
    raw = cluster(tmp_path)
    del raw["environment"]["metrics_port"]  # no environment runs: the page says what it read
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(raw))
    cfg = ClusterConfig.model_validate(raw)
    token = cfg.auth.resolve(create=True)
    proc = subprocess.Popen(
        [MEGAFLOW, "serve", "scheduler", "-c", str(path)], cwd=tmp_path,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        deadline, line = time.monotonic() + 30, ""
        while time.monotonic() < deadline and "dashboard: sign in" not in line:
            line = proc.stdout.readline()
            assert line or proc.poll() is None, "megaflow serve ended"
        link = re.search(r"http://\S+/login\?code=\S+", line)
        assert link, line
        with concurrent.futures.ThreadPoolExecutor(1) as pool:  # the browser holds this loop
            pool.submit(asyncio.run, submit(cfg, token, "cl", 6)).result(timeout=60)
        base = link.group(0).split("/login")[0]
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(f"{base}/scheduler")
        assert page.url.endswith("/login?next=%2Fscheduler")
        page.fill("input[name=token]", token)
        page.locator("button, input[type=submit]").first.click()
        page.wait_for_selector("#scheduler-table")  # back on the page asked for
        assert page.url == f"{base}/scheduler"
        assert "succeeded 6" in page.locator("#scheduler-table").inner_text()
        page.wait_for_selector("#rate-chart canvas")
        page.screenshot(path=str(shots / "scheduler-cluster.png"), full_page=True)
        page.goto(f"{base}/")
        page.wait_for_selector("#runs-table")
        assert "6/6" in page.locator("#runs-table").inner_text()
    finally:
        proc.terminate()
        proc.wait(timeout=15)

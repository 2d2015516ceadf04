"""A run on a local cluster (one process per service) gives the results of the embedded run."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from megaflow.storage.sqlite import SqliteMetadataStore
from tests.rpc.test_local_cluster import free_port

CLI = [sys.executable, "-c", "from megaflow.cli.main import main; main()"]
TASKS = Path(__file__).resolve().parents[2] / "tasks" / "mini-swe"


def megaflow(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(
        [*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=env
    )


def outcomes(db: Path) -> dict[tuple[str, str], tuple[bool, float]]:
    """(arm, task without its run id) -> (success, reward), for every run in ``db``."""

    async def go() -> dict[tuple[str, str], tuple[bool, float]]:
        out = {}
        async with SqliteMetadataStore(str(db)) as md:
            for run in await md.list_runs():
                for res in await md.list_results(run.id):
                    key = (run.labels.get("arm", "main"), res.task_id.split("/", 1)[1])
                    out[key] = (res.success, res.reward)
        return out

    return asyncio.run(go())


@pytest.fixture
def cluster_yaml(tmp_path: Path) -> Iterator[Path]:
    state = tmp_path / "cluster"
    cfg = {
        "state_dir": str(state),
        "auth": {"token_file": str(state / "token")},
        "scheduler": {
            "port": free_port(),
            "executor": "agent",
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
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(cfg))
    try:
        yield path
    finally:
        megaflow("down", str(path), cwd=tmp_path)


@pytest.mark.slow
def test_cluster_run_matches_the_embedded_run(cluster_yaml: Path, tmp_path: Path) -> None:
    run = {
        "name": "mini",
        "samples": 1,
        "tasks": {"type": "swebench", "path": str(TASKS), "limit": 2},
        "agent": {"type": "builtin", "max_steps": 10},
        "model": {"type": "replay", "play": "gold"},
        "control": {"model": {"type": "replay", "play": "empty"}},
        "environment": {"runtime": {"type": "local", "root": str(tmp_path / "sb")}},
        "storage": {
            "metadata": {"type": "sqlite", "path": str(tmp_path / "embedded.db")},
            "artifacts": {"type": "local", "root": str(tmp_path / "artifacts")},
        },
    }
    run_yaml = tmp_path / "run.yaml"
    run_yaml.write_text(yaml.safe_dump(run))
    embedded = megaflow("run", str(run_yaml), cwd=tmp_path)
    assert embedded.returncode == 0, embedded.stdout + embedded.stderr

    up = megaflow("up", str(cluster_yaml), cwd=tmp_path)
    assert up.returncode == 0, up.stdout + up.stderr
    cfg = yaml.safe_load(cluster_yaml.read_text())
    submitted = megaflow(
        "submit", str(run_yaml), "--cluster", f"127.0.0.1:{cfg['scheduler']['port']}",
        "--token-file", cfg["auth"]["token_file"], "--wait", cwd=tmp_path,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    down = megaflow("down", str(cluster_yaml), cwd=tmp_path)
    assert down.returncode == 0, down.stderr

    want = outcomes(tmp_path / "embedded.db")
    got = outcomes(Path(cfg["state_dir"]) / "meta.db")
    assert len(want) == 4
    assert got == want
    assert {arm: ok for (arm, _), (ok, _) in want.items()} == {"main": True, "control": False}
    artifacts = Path(cfg["state_dir"]) / "artifacts" / "runs"
    assert len(list(artifacts.glob("*/tasks/**/attempt-1/grade.json"))) == 4

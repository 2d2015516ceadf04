"""The sandboxes, scheduler and training APIs: metrics read from a registry, curves from files.

The sandbox and scheduler figures come from the same metric classes the
runtimes and the scheduler report into (on a registry of the test's own,
with a clock the test moves), so a rate is known in advance; the training
curves are written in the two places ``megaflow train`` leaves them.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from megaflow.core.tasks import RunSpec, TaskSpec, TaskType
from megaflow.dashboard.auth import DashboardAuth
from megaflow.dashboard.live import NO_SOURCE, LiveMetrics, MetricsSource
from megaflow.dashboard.server import create_app
from megaflow.dashboard.training import TrainingRuns
from megaflow.monitoring.environment import EnvironmentMetrics
from megaflow.monitoring.scheduler import SchedulerMetrics
from megaflow.storage.abstract import ArtifactStore
from tests.dashboard.test_api import TOKEN, seed_files

H = {"authorization": f"Bearer {TOKEN}"}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def step(n: int, loss: float, version: int, staleness: int = 0) -> dict[str, object]:
    return {"step": n, "prompts": ["p"], "reward_mean": 0.5, "loss": loss, "kl": 0.01 * n,
            "weights_version": version, "staleness_max": staleness}  # fmt: skip


async def seed_training(art: ArtifactStore, train_dir: Path) -> None:
    """Run ``tr-a`` has a final curve.json (2 steps) and a checkpoint (3 steps, newer
    while it trained); ``tr-b`` only a broken curve file."""
    small = {"run_id": "tr-a", "steps": [step(1, 0.9, 1), step(2, 0.7, 2)], "evals": []}
    (train_dir / "tr-a").mkdir(parents=True)
    (train_dir / "tr-a" / "curve.json").write_text(json.dumps(small))
    evals = [{"step": 0, "weights_version": 0, "reward_mean": 0.2, "samples": 4},
             {"step": 3, "weights_version": 3, "reward_mean": 0.6, "samples": 4}]  # fmt: skip
    big = {"run_id": "tr-a", "steps": [*small["steps"], step(3, 0.5, 3, 1)], "evals": evals}
    prefix = "train/checkpoints/tr-a"
    await art.put(f"{prefix}/latest", json.dumps({"dir": "step-00000003", "files": []}).encode())
    trainer = {"step": 3, "version": 3, "extra": {"curve": big, "cursor": 3}}
    await art.put(f"{prefix}/step-00000003/trainer.json", json.dumps(trainer).encode())
    (train_dir / "tr-b").mkdir()
    (train_dir / "tr-b" / "curve.json").write_text("{not json")


@pytest.fixture
async def app_parts(tmp_path: Path) -> AsyncIterator[tuple[TestClient, CollectorRegistry, Clock]]:
    meta, art = await seed_files(tmp_path)
    await meta.create_run(RunSpec(id="waiting", name="waiting"))
    types = [TaskType.TRAIN, TaskType.TRAIN, TaskType.EVAL]
    await meta.add_tasks(
        [TaskSpec(id=f"waiting/{n}", run_id="waiting", type=t) for n, t in enumerate(types)]
    )
    await seed_training(art, tmp_path / "train")
    reg, clock = CollectorRegistry(), Clock()
    live = LiveMetrics([MetricsSource(name="job", registry=reg)], clock=clock)
    training = TrainingRuns(art, tmp_path / "train", "train/checkpoints")
    app = create_app(meta, art, DashboardAuth(TOKEN), live=live, training=training)
    yield TestClient(app), reg, clock
    await art.stop()
    await meta.stop()


def test_live_apis_need_the_token(app_parts: tuple[TestClient, CollectorRegistry, Clock]) -> None:
    client = app_parts[0]
    for path in ("/api/sandboxes", "/api/scheduler", "/api/training", "/api/training?id=tr-a"):
        assert client.get(path).status_code == 401, path
    for page in ("/sandboxes", "/scheduler", "/training"):
        assert client.get(page, follow_redirects=False).status_code == 303, page


def test_sandboxes_cpu_and_memory(app_parts: tuple[TestClient, CollectorRegistry, Clock]) -> None:
    client, reg, clock = app_parts
    env = EnvironmentMetrics(reg)
    env.moved("local", None, "busy")
    env.sandbox_usage("local", "sb-1", cpu_seconds=10.0, memory_bytes=64 << 20)
    first = client.get("/api/sandboxes", headers=H).json()
    assert first["reason"] is None
    assert first["states"] == [{"runtime": "local", "source": "job", "states": {"busy": 1.0}}]
    assert (first["live"], first["measured"]) == (1, 1)  # the page's two counts agree
    [row] = first["sandboxes"]
    assert (row["sandbox"], row["memory_bytes"], row["cpu_percent"]) == ("sb-1", 64 << 20, None)
    clock.now += 4.0
    env.sandbox_usage("local", "sb-1", cpu_seconds=12.0, memory_bytes=80 << 20)
    [row] = client.get("/api/sandboxes", headers=H).json()["sandboxes"]
    assert row["cpu_percent"] == pytest.approx(50.0)  # 2 s of CPU in 4 s
    env.sandbox_gone("local", "sb-1")
    assert client.get("/api/sandboxes", headers=H).json()["sandboxes"] == []


def test_scheduler_figures(app_parts: tuple[TestClient, CollectorRegistry, Clock]) -> None:
    client, reg, clock = app_parts
    sm = SchedulerMetrics(reg)
    sm.queue_depth.set(3)
    sm.fragmentation.set(0.25)
    sm.decisions.inc(10)
    view = client.get("/api/scheduler", headers=H).json()
    assert view["queued"] == {"by_type": {"train": 2, "eval": 1}, "by_run": {"waiting": 3},
                              "total": 3, "stuck": 0}  # fmt: skip
    [row] = view["schedulers"]
    assert (row["queue_depth"], row["fragmentation"], row["decisions"]) == (3, 0.25, 10)
    assert row["decisions_per_s"] is None  # a rate needs two readings
    clock.now += 2.0
    sm.decisions.inc(30)
    [row] = client.get("/api/scheduler", headers=H).json()["schedulers"]
    assert row["decisions_per_s"] == pytest.approx(15.0)


async def test_no_source_says_so_and_invents_nothing() -> None:
    view = await LiveMetrics([]).sandboxes()
    assert (view["reason"], view["sandboxes"], view["states"]) == (NO_SOURCE, [], [])
    down = LiveMetrics([MetricsSource(name="gone", url="http://127.0.0.1:9/metrics")])
    sched = await down.scheduler()
    assert sched["reason"] == "no metrics source answered"
    assert sched["schedulers"] == []
    [src] = sched["sources"]
    assert not src["ok"]
    assert "ConnectError" in src["error"]
    empty = LiveMetrics([MetricsSource(name="bare", registry=CollectorRegistry())])
    assert (await empty.sandboxes())["reason"] == "the metrics read export no sandbox metrics"


def test_training_curves(app_parts: tuple[TestClient, CollectorRegistry, Clock]) -> None:
    client = app_parts[0]
    runs = {r["run"]: r for r in client.get("/api/training", headers=H).json()}
    assert set(runs) == {"tr-a", "tr-b"}
    a = runs["tr-a"]
    assert a["source"] == "checkpoint train/checkpoints/tr-a"  # more points than curve.json
    assert (a["steps"], a["weights_version"], a["loss"], a["staleness_max"]) == (3, 3, 0.5, 1)
    assert a["heldout_reward"] == 0.6
    assert runs["tr-b"]["source"] is None
    assert "curve.json" in runs["tr-b"]["problems"][0]
    view = client.get("/api/training?id=tr-a", headers=H).json()
    assert [e["reward_mean"] for e in view["curve"]["evals"]] == [0.2, 0.6]
    assert [s["kl"] for s in view["curve"]["steps"]] == [0.01, 0.02, 0.03]
    assert client.get("/api/training?id=nope", headers=H).status_code == 404
    assert client.get("/api/training?id=..", headers=H).status_code == 404

"""What the sandboxes and scheduler pages show without metrics, and a run's outcome counts.

A real SQLite store holds two runs as the quickstart leaves them when one of
its processes is killed: ``alive`` (its driver lease held) with a task
running, one grading and one queued, and ``dead`` (its lease ended) with two
tasks stuck grading and one queued. The pages' API must count only the live
run's tasks as in flight or waiting and say how many are stuck. A finished
run's summary counts its tasks by outcome word, never by the state
``succeeded`` beside an error count, and a control arm says it is one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from megaflow.core.states import TaskState
from megaflow.core.tasks import ErrorKind, RunSpec, TaskResult, TaskSpec
from megaflow.dashboard.auth import DashboardAuth
from megaflow.dashboard.server import create_app
from megaflow.storage.abstract import MetadataStore
from megaflow.storage.config import LocalArtifactsConfig, SqliteMetadataConfig

TOKEN = "f" * 32
H = {"authorization": f"Bearer {TOKEN}"}
TO_GRADING = [TaskState.SCHEDULED, TaskState.STARTING, TaskState.RUNNING, TaskState.GRADING]


async def _move(meta: MetadataStore, task_id: str, states: list[TaskState]) -> None:
    for s in states:
        await meta.transition(task_id, s)


async def _run(meta: MetadataStore, run: str, ttl_s: float) -> list[str]:
    await meta.create_run(RunSpec(id=run, name=run, labels={"job": run}))
    ids = [f"{run}/t{n}/0" for n in range(3)]
    await meta.add_tasks([TaskSpec(id=i, run_id=run) for i in ids])
    await meta.claim_lease(run, f"elsewhere:1:{run}", ttl_s=ttl_s)
    return ids


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[TestClient]:
    meta = SqliteMetadataConfig(path=str(tmp_path / "m.db")).build()
    art = LocalArtifactsConfig(root=str(tmp_path / "art")).build()
    async with meta, art:
        alive = await _run(meta, "alive", ttl_s=600)
        await _move(meta, alive[0], TO_GRADING[:3])
        await _move(meta, alive[1], TO_GRADING)
        dead = await _run(meta, "dead", ttl_s=0.001)  # its driver stopped renewing
        await _move(meta, dead[0], TO_GRADING)
        await _move(meta, dead[1], TO_GRADING)
        await _finished(meta)
        yield TestClient(create_app(meta, art, DashboardAuth(TOKEN)))


async def _finished(meta: MetadataStore) -> None:
    """Run ``done``: resolved, unresolved, an agent error, an infra failure; its control arm."""
    await meta.create_run(RunSpec(id="done", name="done", labels={"arm": "main", "job": "done"}))
    config = {"expect": {"max_control_resolved": 0.0}}
    control = RunSpec(
        id="done-control", name="done", config=config, labels={"arm": "control", "job": "done"}
    )
    await meta.create_run(control)
    ids = [f"done/t{n}/0" for n in range(4)]
    await meta.add_tasks([TaskSpec(id=i, run_id="done") for i in ids])
    results = [
        TaskResult(task_id=ids[0], success=True, reward=1.0),
        TaskResult(task_id=ids[1], success=False, reward=0.0),
        TaskResult(task_id=ids[2], reward=0.0, error_kind=ErrorKind.AGENT, error="gave up"),
    ]
    for res in results:
        await _move(meta, res.task_id, [*TO_GRADING, TaskState.SUCCEEDED])
        await meta.put_result(res)
    await _move(meta, ids[3], [TaskState.SCHEDULED, TaskState.STARTING, TaskState.FAILED])


def test_sandboxes_in_flight_without_metrics(client: TestClient) -> None:
    view = client.get("/api/sandboxes", headers=H).json()
    flight = view["in_flight"]
    assert flight["live"] == {"scheduled": 0, "starting": 0, "running": 1, "grading": 1}
    assert (flight["live_total"], flight["stuck"], flight["total"]) == (2, 2, 4)
    rows = {r["task"]: r for r in flight["tasks"]}
    assert rows["alive/t0/0"]["state"] == "running"
    assert rows["alive/t0/0"]["short_id"] == "t0/0"
    assert not rows["alive/t0/0"]["driver_gone"]
    assert rows["dead/t0/0"]["driver_gone"]
    assert view["reason"] is not None  # no metrics source: the store's figures stand alone


def test_scheduler_queue_leaves_out_runs_whose_driver_is_gone(client: TestClient) -> None:
    view = client.get("/api/scheduler", headers=H).json()
    assert view["queued"] == {"by_type": {"eval": 1}, "by_run": {"alive": 1}, "total": 1,
                              "stuck": 1}  # fmt: skip
    assert view["in_flight"]["stuck"] == 2


def test_summary_counts_outcomes_and_names_the_control_arm(client: TestClient) -> None:
    runs = {r["id"]: r for r in client.get("/api/runs", headers=H).json()}
    done = runs["done"]
    assert list(done["by_outcome"].items()) == [
        ("resolved", 1), ("unresolved", 1), ("agent error", 1), ("infra error", 1),
    ]  # fmt: skip
    assert "succeeded" not in done["by_outcome"]
    assert (done["arm"], done["control_limit"]) == ("main", None)
    control = runs["done-control"]
    assert (control["arm"], control["job"], control["control_limit"]) == ("control", "done", 0.0)
    assert runs["dead"]["driver"] == "gone"
    assert runs["alive"]["driver"] == "alive"

"""A run stopped and resumed: the dashboard's throughput is the figure `megaflow run
--resume` prints (the tasks done since the resume over its time), not done tasks over
the whole time since the run was created, stop included (a resumed run read 0.05 tasks/s
on the dashboard against 0.32 from the command line).

Seeded in a real SQLite store on a fake clock: 4 tasks done in the first 20 s, a task
in flight when the run stops, a stop of 980 s, the resume through the real
:func:`~megaflow.storage.recovery.recover_queue`, then the other 6 tasks in 30 s.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from megaflow.agent.metrics import summarize
from megaflow.app.summary import ArmSummary, JobSummary
from megaflow.core.states import TaskState
from megaflow.core.tasks import Attempt, RunSpec, TaskResult, TaskSpec
from megaflow.dashboard.auth import DashboardAuth
from megaflow.dashboard.server import create_app
from megaflow.storage.abstract import MetadataStore
from megaflow.storage.config import LocalArtifactsConfig, SqliteMetadataConfig
from megaflow.storage.memory_queue import MemoryTaskQueue
from megaflow.storage.recovery import recover_queue

TOKEN = "t" * 32
H = {"authorization": f"Bearer {TOKEN}"}
RUN = "resumed"
T0 = 1_000_000.0
FLIGHT = [TaskState.SCHEDULED, TaskState.STARTING, TaskState.RUNNING]


class Clock:
    """``time.time`` for the store while seeding: set by hand."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


async def _start(meta: MetadataStore, task: str, clock: Clock, at: float) -> None:
    clock.now = at
    for dst in FLIGHT:
        await meta.transition(task, dst)
    number = (await meta.get_task(task)).attempts
    await meta.put_attempt(Attempt(task_id=task, number=number, started_at=at))


async def _done(meta: MetadataStore, task: str, clock: Clock, at: float) -> None:
    clock.now = at
    await meta.transition(task, TaskState.GRADING)
    await meta.put_result(TaskResult(task_id=task, success=True, reward=1.0, finished_at=at))
    await meta.transition(task, TaskState.SUCCEEDED)


async def seed(meta: MetadataStore, clock: Clock) -> None:
    await meta.create_run(RunSpec(id=RUN, name="resumed", created_at=T0))
    ids = [f"{RUN}/t{n}/0" for n in range(10)]
    await meta.add_tasks([TaskSpec(id=i, run_id=RUN) for i in ids])
    for n in range(4):  # the first process: 4 tasks in 20 s
        await _start(meta, ids[n], clock, T0 + 5 * n)
        await _done(meta, ids[n], clock, T0 + 5 * (n + 1))
    await _start(meta, ids[4], clock, T0 + 18)  # in flight when the process stops
    clock.now = T0 + 1000  # `megaflow run --resume`, 980 s later
    report = await recover_queue(meta, MemoryTaskQueue(), RUN)
    assert report.lost_in_flight == 1
    for n in range(4, 10):  # the resume: 6 tasks in 30 s
        await _start(meta, ids[n], clock, T0 + 1000 + 5 * (n - 4))
        await _done(meta, ids[n], clock, T0 + 1000 + 5 * (n - 3))


@pytest.fixture
async def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[TestClient]:
    meta = SqliteMetadataConfig(path=str(tmp_path / "m.db")).build()
    art = LocalArtifactsConfig(root=str(tmp_path / "art")).build()
    await meta.start()
    await art.start()
    with monkeypatch.context() as m:
        m.setattr(time, "time", Clock())
        await seed(meta, time.time)  # type: ignore[arg-type]
    yield TestClient(create_app(meta, art, DashboardAuth(TOKEN)), follow_redirects=False)
    await art.stop()
    await meta.stop()


def test_a_resumed_runs_throughput_is_the_command_lines(client: TestClient) -> None:
    # what `megaflow run --resume` prints: 6 tasks its process ran over its 30 s
    arm = ArmSummary(
        run_id=RUN, arm="main", counts={TaskState.SUCCEEDED: 10}, metrics=summarize([]),
        task_p50_s=None, task_p99_s=None, start_p50_s=None, start_p99_s=None,
    )  # fmt: skip
    cli = JobSummary(arms=[arm], wall_s=30.0, before=4).throughput
    assert cli == pytest.approx(0.2)
    for path in ("/api/runs", f"/api/run?id={RUN}"):
        body = client.get(path, headers=H).json()
        view = body[0] if isinstance(body, list) else body["summary"]
        assert view["done"] == 10
        assert view["throughput"] == pytest.approx(cli), path  # not 10 / 1030 s
        assert view["started_at"] == pytest.approx(T0 + 1000)  # the resume

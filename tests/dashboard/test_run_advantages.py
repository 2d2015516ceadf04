"""The trajectory page's advantages are the run's own estimator's, named, over the step.

Each run below is seeded in a real SQLite store with the ``train.algorithm`` of
its config; the figures asked of ``/api/trajectory`` are those of the
registry's estimator with those options, written out by hand here. A run
whose page showed GRPO's figures whatever its algorithm fails every case
but the GRPO one.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from megaflow.core.states import TaskState
from megaflow.core.tasks import RunSpec, TaskResult, TaskSpec, TaskType
from megaflow.core.trajectory import Trajectory
from megaflow.dashboard.auth import DashboardAuth
from megaflow.dashboard.server import create_app
from megaflow.storage.abstract import ArtifactStore, MetadataStore
from tests.dashboard.stores import open_stores

TOKEN = "a" * 32
H = {"authorization": f"Bearer {TOKEN}"}
PATH = [TaskState.SCHEDULED, TaskState.STARTING, TaskState.RUNNING, TaskState.GRADING]
#: Two groups of one step, and a group of the next step the estimator must not see.
STEP = {"s00001.a": [1.0, 0.0, 0.0, 0.0], "s00001.b": [1.0, 1.0, 1.0, 0.0], "s00002.a": [5.0, 0.0]}


async def _seed(meta: MetadataStore, art: ArtifactStore, run: str, algo: dict[str, Any]) -> None:
    await meta.create_run(RunSpec(id=run, name=run, config={"train": {"algorithm": algo}}))
    specs = [
        TaskSpec(id=f"{run}/inc.{g}/{n}", run_id=run, type=TaskType.TRAIN, sample=n)
        for g, rewards in STEP.items()
        for n in range(len(rewards))
    ]
    await meta.add_tasks(specs)
    rewards = [r for rs in STEP.values() for r in rs]
    for spec, reward in zip(specs, rewards, strict=True):
        key = f"runs/{spec.id}/trajectory.json"
        traj = Trajectory(id=f"{spec.id}/a1", task_id=spec.id, run_id=run)
        traj.meta.update(task_type="train")  # no tokens: the group table is what is asked
        await art.put(key, json.dumps(traj.model_dump(mode="json")).encode())
        for dst in [*PATH, TaskState.SUCCEEDED]:
            await meta.transition(spec.id, dst)
        await meta.put_result(
            TaskResult(task_id=spec.id, success=reward == 1.0, reward=reward,
                       artifacts={"trajectory": key})
        )  # fmt: skip


RUNS: dict[str, dict[str, Any]] = {
    "grpo": {"type": "grpo"},
    "drgrpo": {"type": "dr_grpo", "max_tokens": 64},
    "rloo": {"type": "rloo"},
    "rpp": {"type": "reinforce_pp"},
    "rppg": {"type": "reinforce_pp", "baseline": "group"},
    "plugin": {"type": "custom", "advantage": "somewhere.module.estimator"},
}


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[TestClient]:
    async with open_stores(tmp_path) as (meta, art):
        for run, algo in RUNS.items():
            await _seed(meta, art, run, algo)
        yield TestClient(create_app(meta, art, DashboardAuth(TOKEN)), follow_redirects=False)


def _group(client: TestClient, run: str) -> dict[str, Any]:
    r = client.get(f"/api/trajectory?id={run}/inc.s00001.a/0", headers=H)
    assert r.status_code == 200, r.text
    g: dict[str, Any] = r.json()["group_rewards"]
    return g


def _pstd(xs: list[float]) -> float:
    m = sum(xs) / len(xs)
    return float((sum((x - m) ** 2 for x in xs) / len(xs)) ** 0.5)


def test_each_algorithm_shows_its_own_advantages(client: TestClient) -> None:
    a = STEP["s00001.a"]  # mean 0.25, pstdev 0.433
    expect = {
        "grpo": [(r - 0.25) / (_pstd(a) + 1e-6) for r in a],
        "drgrpo": [r - 0.25 for r in a],  # no std scaling
        "rloo": [r - (sum(a) - r) / 3 for r in a],  # leave-one-out: 1, -1/3, -1/3, -1/3
    }
    every = [*a, *STEP["s00001.b"]]  # REINFORCE++ normalises over the whole step
    m, sd = sum(every) / len(every), _pstd(every)
    expect["rpp"] = [(r - m) / (sd + 1e-6) for r in a]
    centred = [r - 0.25 for r in a] + [r - 0.75 for r in STEP["s00001.b"]]
    cm, csd = sum(centred) / len(centred), _pstd(centred)
    expect["rppg"] = [(c - cm) / (csd + 1e-6) for c in centred[:4]]
    names = {"grpo": "grpo", "drgrpo": "dr_grpo", "rloo": "rloo", "rpp": "reinforce_pp"}
    for run, want in expect.items():
        g = _group(client, run)
        got = [m["advantage"] for m in g["members"]]
        assert got == pytest.approx(want, abs=1e-5), run
        assert g["estimator"]["name"] == names.get(run, "reinforce_pp")
        assert g["estimator"]["step_groups"] == 2  # s00002's group is another step's
        assert g["estimator"]["problem"] is None
    assert "leave-one-out" in _group(client, "rloo")["estimator"]["formula"]
    assert "no std scaling" in _group(client, "drgrpo")["estimator"]["formula"]


def test_a_plugin_estimator_is_named_not_imported(client: TestClient) -> None:
    g = _group(client, "plugin")
    assert g["estimator"]["name"] == "custom"
    assert "somewhere.module.estimator" in g["estimator"]["formula"]
    assert "not loaded" in g["estimator"]["problem"]
    assert [m["advantage"] for m in g["members"]] == [None] * 4

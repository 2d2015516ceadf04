"""A train run's progress total is known from the start, train and held-out apart.

The run is seeded in a real SQLite store as a train run is while it runs: its
first step's train samples and its first held-out round's sampled tasks
(the greedy ones not yet queued). The total the run page draws must be what
the run plans, not the tasks queued so far, and must not move when the next
step's samples are queued.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from megaflow.config import parse_config
from megaflow.core.tasks import RunSpec, TaskSpec, TaskType
from megaflow.dashboard.auth import DashboardAuth
from megaflow.dashboard.server import create_app
from megaflow.storage.abstract import MetadataStore
from tests.dashboard.stores import open_stores

ROOT = Path(__file__).parents[2]
TOKEN = "p" * 32
H = {"authorization": f"Bearer {TOKEN}"}
RUN = "tr"
# 4 steps x 2 prompts x 2 samples = 16 train samples; held-out rounds before training,
# after steps 2 and 4: 3 rounds of 3 tasks x (2 sampled + 1 greedy) = 27 held-out samples
TRAIN = {"steps": 4, "prompts_per_step": 2, "eval_every": 2, "eval_before": True,
         "eval_samples": 2, "eval_greedy": True}  # fmt: skip


def _config() -> dict[str, Any]:
    cfg = yaml.safe_load((ROOT / "examples" / "train-quickstart.yaml").read_text())
    cfg["samples"] = 2
    cfg["train"].update(TRAIN)
    return parse_config(cfg).model_dump(mode="json")


async def _queue_step(meta: MetadataStore, step: int) -> None:
    await meta.add_tasks([
        TaskSpec(id=f"{RUN}/ab12.s{step:05d}.p{p}/{n}", run_id=RUN, type=TaskType.TRAIN, sample=n)
        for p in range(2) for n in range(2)
    ])  # fmt: skip


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[tuple[MetadataStore, TestClient]]:
    async with open_stores(tmp_path) as (meta, art):
        await meta.create_run(RunSpec(id=RUN, name=RUN, config=_config()))
        await meta.add_tasks([
            TaskSpec(id=f"{RUN}/ab12.e00000.h{i}/{n}", run_id=RUN, type=TaskType.EVAL, sample=n)
            for i in range(3) for n in range(2)
        ])  # fmt: skip
        await _queue_step(meta, 1)
        app = create_app(meta, art, DashboardAuth(TOKEN))
        yield meta, TestClient(app, follow_redirects=False)


def test_heldout_rounds_follow_the_loop() -> None:
    tc = parse_config(_config()).train
    assert tc is not None
    assert tc.heldout_rounds() == 3  # before, after step 2, after step 4 (also the last)
    assert tc.model_copy(update={"eval_every": 3}).heldout_rounds() == 3  # 0, 3, 4
    assert tc.model_copy(update={"eval_every": 0, "eval_before": False}).heldout_rounds() == 1


async def test_the_total_is_planned_from_the_start(
    stores: tuple[MetadataStore, TestClient],
) -> None:
    meta, client = stores
    s = client.get(f"/api/run?id={RUN}", headers=H).json()["summary"]
    assert s["progress"]["train"] == {"done": 0, "total": 16, "basis": "planned", "note": ""}
    assert s["progress"]["eval"]["total"] == 27
    assert s["progress"]["eval"]["note"] == "1 of 3 held-out rounds submitted"
    assert s["total"] == 16 + 27
    await _queue_step(meta, 2)  # the next step's samples: the total does not grow
    again = client.get(f"/api/run?id={RUN}", headers=H).json()["summary"]
    assert again["total"] == 16 + 27
    assert again["progress"]["train"]["total"] == 16

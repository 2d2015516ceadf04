"""finished_groups: every group of a train run, once all its samples are terminal."""

from __future__ import annotations

import math
from pathlib import Path

from megaflow.app.groups import finished_groups
from megaflow.app.job import Job
from megaflow.config import parse_config
from megaflow.config.models import RunConfig
from megaflow.core.tasks import TaskSpec, TaskType, sample_id


def train_config(tmp: Path, **over: object) -> RunConfig:
    cfg: dict[str, object] = {
        "name": "g",
        "task_type": "train",
        "samples": 2,
        "tasks": {
            "type": "inline",
            "tasks": [{"id": f"p{i}", "payload": {"prompt": f"say {i}"}} for i in range(3)],
        },
        "agent": {"type": "builtin", "max_steps": 3, "temperature": 1.0},
        "model": {"type": "scripted", "bash": ["echo hi"]},
        "environment": {"runtime": {"type": "dummy"}},
        "storage": {
            "metadata": {"type": "sqlite", "path": str(tmp / "m.db")},
            "artifacts": {"type": "local", "root": str(tmp / "art")},
        },
    }
    cfg.update(over)
    return parse_config(cfg)


async def test_every_group_once_with_each_sample_flagged(tmp_path: Path) -> None:
    async with Job(train_config(tmp_path)) as job:
        await job.submit()
        groups = [g async for g in finished_groups(job, job.run_id)]
    assert sorted(g.group_id for g in groups) == [f"{job.run_id}/p{i}" for i in range(3)]
    for g in groups:
        assert sorted(s.sample_id for s in g.samples) == [f"{g.group_id}/0", f"{g.group_id}/1"]
        # the scripted backend records no token ids: no sample is usable, each says why
        assert g.usable == []
        assert all(s.masked and math.isnan(s.reward) for s in g.samples)
        assert set(g.problems) == {s.sample_id for s in g.samples}
        assert all("no model call with token data" in p for p in g.problems.values())


async def test_rounds_on_one_job_yield_only_their_groups(tmp_path: Path) -> None:
    async with Job(train_config(tmp_path)) as job:
        await job.submit()
        first = [g.group_id async for g in finished_groups(job, job.run_id)]
        batch = [
            TaskSpec(
                id=sample_id(job.run_id, "step1.q", n), run_id=job.run_id, type=TaskType.TRAIN,
                sample=n, payload={"prompt": "again"},
            )
            for n in range(2)
        ]  # fmt: skip
        await job.submit_tasks(batch)
        second = [g async for g in finished_groups(job, job.run_id, tasks=[t.id for t in batch])]
    assert len(first) == 3
    assert [g.group_id for g in second] == [f"{job.run_id}/step1.q"]
    assert len(second[0].samples) == 2


async def test_a_synth_run_says_its_samples_keep_no_token_data(tmp_path: Path) -> None:
    async with Job(train_config(tmp_path, task_type="synth", samples=1)) as job:
        await job.submit()
        groups = [g async for g in finished_groups(job, job.run_id)]
    assert len(groups) == 3
    assert all(
        "a synth sample keeps no token data" in p for g in groups for p in g.problems.values()
    )

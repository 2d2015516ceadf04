"""Task types on the real path: every stored trajectory names its type and group,
and only a train sample keeps its token data (the tiny model records it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from megaflow.app.job import Job
from megaflow.config import parse_config
from megaflow.model.transformers_lm import build_tiny_model


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.mark.parametrize(("task_type", "keeps_tokens"), [("train", True), ("synth", False)])
async def test_stored_trajectory_by_type(
    tiny: Path, tmp_path: Path, task_type: str, keeps_tokens: bool
) -> None:
    cfg = parse_config(
        {
            "name": "types",
            "task_type": task_type,
            "tasks": {"type": "inline", "tasks": [{"id": "q", "payload": {"prompt": "fix it"}}]},
            "agent": {"type": "builtin", "max_steps": 1, "temperature": 1.0},
            "model": {"type": "transformers", "model": str(tiny), "max_new_tokens": 4},
            "environment": {"runtime": {"type": "dummy"}},
            "storage": {
                "metadata": {"type": "sqlite", "path": str(tmp_path / "m.db")},
                "artifacts": {"type": "local", "root": str(tmp_path / "art")},
            },
        }
    )
    async with Job(cfg) as job:
        await job.submit()
        await job.wait()
        (res,) = await job.stores.metadata.list_results(job.run_id)
        traj = json.loads(await job.stores.artifacts.get(res.artifacts["trajectory"]))
    assert traj["meta"]["task_type"] == task_type
    assert traj["meta"]["task_type_source"] == "given"
    assert traj["meta"]["group_id"] == f"{job.run_id}/q"
    (call,) = [s for s in traj["steps"] if s["kind"] == "model_call"]
    assert call["completion_tokens"] > 0
    for field in ("prompt_token_ids", "token_ids", "logprobs"):
        assert (call[field] is not None) is keeps_tokens, field

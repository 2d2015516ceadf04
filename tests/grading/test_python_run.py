"""The ``python`` grader through `megaflow run`: QA tasks written in the config,
answered in a real (bubblewrap) sandbox, rewarded on the host by a function the
config names; a bad function path exits 2 before anything runs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.storage.sqlite import SqliteMetadataStore

runner = CliRunner()
FN = "tests.grading.rewards_for_tests.exact_match"


def _config(tmp: Path, function: str = FN) -> Path:
    cfg: dict[str, Any] = {
        "name": "qa",
        "task_type": "eval",
        "tasks": {
            "type": "inline",
            "tasks": [
                {
                    "id": f"q{n}",
                    "payload": {"problem_statement": f"What is 40 + {n}?", "answer": 40 + n},
                }
                for n in (2, 3)
            ],
        },
        "grading": {"type": "python", "function": function},
        "agent": {"type": "builtin", "max_steps": 3},
        "model": {"type": "scripted", "bash": ["echo 42 > answer.txt"]},
        "environment": {"runtime": {"type": "local", "root": str(tmp / "sandboxes")}},
        "storage": {
            "metadata": {"type": "sqlite", "path": str(tmp / "m.db")},
            "artifacts": {"type": "local", "root": str(tmp / "art")},
        },
    }
    path = tmp / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _rewards(db: Path) -> dict[str, float]:
    async def go() -> dict[str, float]:
        async with SqliteMetadataStore(str(db)) as store:
            (run,) = await store.list_runs()
            return {r.task_id.split("/")[1]: r.reward for r in await store.list_results(run.id)}

    return asyncio.run(go())


def test_the_named_function_rewards_each_answer(tmp_path: Path) -> None:
    res = runner.invoke(app, ["run", str(_config(tmp_path))], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert _rewards(tmp_path / "m.db") == {"q2": 1.0, "q3": 0.0}  # every agent answers 42


def test_a_function_that_does_not_load_exits_2(tmp_path: Path) -> None:
    res = runner.invoke(app, ["run", str(_config(tmp_path, "tests.grading.nowhere.fn"))])
    assert res.exit_code == 2, res.output
    assert "grading" in res.output
    assert "cannot import module" in res.output
    assert not (tmp_path / "m.db").exists()

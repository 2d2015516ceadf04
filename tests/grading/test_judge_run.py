"""The ``judge`` grader through `megaflow run`: the run's own small transformers
model answers in a real (bubblewrap) sandbox and then judges through the same
model service; the judge's calls are kept in the grade report and never reach
the trajectory or ``export --training``. The tiny random model does not judge
(its replies are malformed, so rewards are 0): this is a test of the plumbing.
A config without a rubric exits 2 naming the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.train.quickstart_model import PolicyConfig, build_policy

runner = CliRunner()
QUESTION = "What is 6 * 7? Answer with the number only."


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    texts = [QUESTION, "The answer is 42.", "SCORE: 1", "Grade the answer by the rubric."]
    out = tmp_path_factory.mktemp("tiny-judge")
    return build_policy(out, texts, PolicyConfig(hidden=16, layers=1, intermediate=32))


def _config(tmp: Path, model: Path, grading: dict[str, Any]) -> Path:
    cfg: dict[str, Any] = {
        "name": "judged",
        "task_type": "train",
        "samples": 2,
        "tasks": {
            "type": "inline", "tasks": [{"id": "q", "payload": {"problem_statement": QUESTION}}]
        },
        "grading": grading,
        "agent": {"type": "builtin", "max_steps": 1, "completion_tokens": 8, "temperature": 1.0},
        "model": {"type": "transformers", "model": str(model), "temperature": 1.0},
        "environment": {"runtime": {"type": "local", "root": str(tmp / "sandboxes")}},
        "storage": {
            "metadata": {"type": "sqlite", "path": str(tmp / "m.db")},
            "artifacts": {"type": "local", "root": str(tmp / "art")},
        },
    }  # fmt: skip
    path = tmp / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_judge_calls_are_recorded_apart_and_never_exported_for_training(
    tmp_path: Path, tiny: Path
) -> None:
    grading = {"type": "judge", "rubric": "1 if the answer is 42.", "max_tokens": 8}
    res = runner.invoke(app, ["run", str(_config(tmp_path, tiny, grading))], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    grades = sorted((tmp_path / "art").rglob("grade.json"))
    trajs = sorted((tmp_path / "art").rglob("trajectory.json"))
    assert len(grades) == len(trajs) == 2
    judge_prompts: list[list[int]] = []
    for grade_file, traj_file in zip(grades, trajs, strict=True):
        grade = json.loads(grade_file.read_text())
        traj = json.loads(traj_file.read_text())
        assert grade["grader"] == "judge"
        assert grade["for_training"] is False
        assert grade["judge_trajectory"] == f"{traj['id']}.judge"
        (call,) = grade["judge_calls"]  # recorded by the run's model service
        assert "RUBRIC:\n1 if the answer is 42." in call["request"]["messages"][1]["content"]
        assert call["prompt_token_ids"]  # a real model's call, tokens and all
        judge_prompts.append(call["prompt_token_ids"])
        # the random model's reply breaks the rule: reward 0, with why
        assert grade["reward"] == 0.0
        assert "malformed judge reply" in grade["error"]
        agent_calls = [s for s in traj["steps"] if s["kind"] == "model_call"]
        assert agent_calls
        assert all("RUBRIC:" not in json.dumps(c["request"]) for c in agent_calls)
    out = tmp_path / "train.jsonl"
    run_id = json.loads(trajs[0].read_text())["run_id"]
    args = ["export", run_id, "--training", "--db", str(tmp_path / "m.db")]
    res = runner.invoke(app, [*args, "--artifacts", str(tmp_path / "art"), "-o", str(out)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2
    assert all(r["prompt_ids"] for r in rows)
    for row in rows:
        episode = row["prompt_ids"] + row["completion_ids"]
        for judged in judge_prompts:  # no judge prompt inside any trained sequence
            n = len(judged)
            assert all(episode[i : i + n] != judged for i in range(len(episode) - n + 1))
        assert not row["sample_id"].endswith(".judge")


def test_the_judge_prompt_would_be_found_in_a_sequence_holding_it() -> None:
    """The check above can fail: a sequence with the prompt inside is caught."""
    judged, episode = [5, 6, 7], [1, 2, 5, 6, 7, 9]
    n = len(judged)
    assert any(episode[i : i + n] == judged for i in range(len(episode) - n + 1))


def test_a_judge_without_a_rubric_exits_2_naming_it(tmp_path: Path, tiny: Path) -> None:
    res = runner.invoke(app, ["run", str(_config(tmp_path, tiny, {"type": "judge"}))])
    assert res.exit_code == 2, res.output
    assert "grading" in res.output
    assert "rubric" in res.output
    assert not (tmp_path / "m.db").exists()

"""A train run over two task sets (``train.sets``): the settings-fix SWE-style set,
graded by the run's swebench grader, and a QA set graded by a ``python`` function,
through real sandboxes and the suite's small random policy (its rewards are 0:
this tests the plumbing, grouping and figures, not learning)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from megaflow.app.training.loop import TrainLoop
from megaflow.cli.main import app
from megaflow.config import parse_config
from tests.train_loop.conftest import TASKS, train_config

pytestmark = pytest.mark.slow
FN = "tests.grading.rewards_for_tests.exact_match"


def _qa(tmp: Path) -> Path:
    path = tmp / "qa.jsonl"
    rows = [
        {"id": f"q{n}", "payload": {"problem_statement": f"What is 40 + {n}?", "answer": 40 + n}}
        for n in range(4)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _mixed(tmp: Path, policy: Path, **train: Any) -> dict[str, Any]:
    raw = train_config(tmp, policy, steps=2, prompts_per_step=2, eval_before=False, **train)
    raw["train"]["held_out"]["limit"] = 1
    raw["train"]["sets"] = [
        {"name": "swe", "path": str(TASKS / "train.jsonl"), "weight": 1.0, "limit": 4},
        {
            "name": "qa", "type": "jsonl", "path": str(_qa(tmp)), "weight": 1.0,
            "grading": {"type": "python", "function": FN},
        },
    ]  # fmt: skip
    return raw


async def test_two_sets_train_with_each_sets_grader_and_figures(
    tmp_path: Path, policy: Path
) -> None:
    lines: list[str] = []
    raw = _mixed(tmp_path, policy, checkpoint_every=2)
    raw["train"]["curriculum"] = {"min_attempts": 2}
    loop = TrainLoop(parse_config(raw), run_id="mix", printer=lines.append)
    curve = await loop.run()
    steps = [line for line in lines if line.startswith("step ")]
    assert len(steps) == 2
    for line in steps:  # both sets' figures on every step line
        assert "  sets swe " in line
        assert "  qa " in line
    grades: dict[str, set[str]] = {"swe": set(), "qa": set()}
    groups: dict[str, set[str]] = {}
    for f in (tmp_path / "art").rglob("grade.json"):
        group, n = f.parents[2].name, f.parents[1].name  # <round>.<set>.<task>/<n>/attempt-1
        if ".s0000" not in group:
            continue  # a held-out round's
        kind = "qa" if ".qa." in group else "swe"
        grades[kind].add(json.loads(f.read_text()).get("grader", "swebench"))
        groups.setdefault(group, set()).add(n)
    assert grades == {"swe": {"swebench"}, "qa": {"python"}}  # each set its own grader
    assert all(ns == {"0", "1"} for ns in groups.values())  # a group is one task's 2 samples
    for point in curve.steps:
        assert point.sets is not None
        assert set(point.sets) == {"swe", "qa"}
        total = sum(int(f["samples"] or 0) for f in point.sets.values())
        assert total == point.samples == 4  # 2 prompts x 2 samples, split between the sets
    written = json.loads((tmp_path / "out" / "mix" / "curve.json").read_text())
    assert set(written["steps"][0]["sets"]) == {"swe", "qa"}  # in the exported curve
    # a resume takes the curriculum's counts back from the checkpoint
    counted = {k: r for k, r in loop.plan.sampler.records.items() if r.graded}  # type: ignore[union-attr]
    assert sum(r.graded for r in counted.values()) == 8
    again = TrainLoop(parse_config(raw), run_id="mix", printer=lines.append)
    await again.run(resume=True)
    assert again.plan.sampler.records == loop.plan.sampler.records  # type: ignore[union-attr]


def test_sets_config_errors_exit_2_naming_the_field(tmp_path: Path, policy: Path) -> None:
    raw = _mixed(tmp_path, policy)
    raw["train"]["sets"][1]["path"] = str(tmp_path / "nowhere.jsonl")
    cfg = tmp_path / "train.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    res = CliRunner().invoke(app, ["train", str(cfg)], env={"COLUMNS": "200"})
    assert res.exit_code == 2, res.output
    assert "train.sets[1].path" in res.output
    raw["train"]["sets"][1]["path"] = str(_qa(tmp_path))
    raw["train"]["sets"][1]["name"] = "swe"
    cfg.write_text(yaml.safe_dump(raw))
    res = CliRunner().invoke(app, ["train", str(cfg)], env={"COLUMNS": "200"})
    assert res.exit_code == 2, res.output
    assert "used twice" in res.output
    raw["train"]["sets"][1]["name"] = "qa"
    del raw["train"]["sets"][1]["grading"]  # QA tasks under the run's swebench grading
    cfg.write_text(yaml.safe_dump(raw))
    res = CliRunner().invoke(app, ["train", str(cfg)], env={"COLUMNS": "200"})
    assert res.exit_code == 2, res.output
    assert "train.sets[1].grading" in res.output

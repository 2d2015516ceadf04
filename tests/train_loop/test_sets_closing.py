"""The closing summary of ``megaflow train`` gives each held-out set's pass@1 with its
interval at the first and the last round, beside the overall figure.

One real ``megaflow train`` (the command, through real sandboxes and the suite's
small random policy, one step) on a QA set with two held-out QA sets and no
``tasks``; its closing lines must carry the figures ``curve.json`` holds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from megaflow.app.training.curve import EvalPoint
from megaflow.app.training.heldout import closing_lines
from megaflow.cli.main import app
from tests.train_loop.conftest import train_config
from tests.train_loop.test_sets_without_tasks import FN, qa_file


def _figures(mean: float | None, low: float, high: float, n: int) -> dict[str, Any]:
    return {"samples": n, "masked": 0, "reward_mean": mean, "ci_low": low, "ci_high": high}


def test_closing_lines_give_each_set_at_the_first_and_last_round() -> None:
    before = EvalPoint(step=0, weights_version=0, reward_mean=0.2,
                       sets={"qa": _figures(0.25, 0.0, 0.6, 4)})  # fmt: skip
    after = EvalPoint(step=3, weights_version=3, reward_mean=0.5,
                      sets={"qa": _figures(0.75, 0.3, 1.0, 4),
                            "swe": _figures(0.5, 0.0, 1.0, 2)})  # fmt: skip
    assert closing_lines([before, after]) == [
        "held-out reward: 0.200 at step 0 -> 0.500 at step 3 (weights v3)",
        "held-out qa: 0.250 [0.000, 0.600] n 4 at step 0 -> 0.750 [0.300, 1.000] n 4 at step 3",
        "held-out swe: none graded at step 0 -> 0.500 [0.000, 1.000] n 2 at step 3",
    ]
    assert closing_lines([after]) == [  # one round: its figures once
        "held-out reward: 0.500 at step 3 (weights v3)",
        "held-out qa: 0.750 [0.300, 1.000] n 4 at step 3",
        "held-out swe: 0.500 [0.000, 1.000] n 2 at step 3",
    ]
    plain = [e.model_copy(update={"sets": None}) for e in (before, after)]
    assert closing_lines(plain) == [closing_lines([before, after])[0]]  # a split: as before
    assert closing_lines([]) == []


def _config(tmp: Path, policy: Path) -> dict[str, Any]:
    raw = train_config(tmp, policy, steps=1, prompts_per_step=1)
    del raw["tasks"]
    graded = {"type": "python", "function": FN}
    raw["train"]["sets"] = [
        {"name": "qa", "type": "jsonl", "path": str(qa_file(tmp / "qa.jsonl", 0, 2)),
         "grading": graded},
    ]  # fmt: skip
    raw["train"]["held_out"] = [
        {"name": "sums", "type": "jsonl", "path": str(qa_file(tmp / "h1.jsonl", 10, 2)),
         "grading": graded},
        {"name": "more", "type": "jsonl", "path": str(qa_file(tmp / "h2.jsonl", 20, 1)),
         "grading": graded},
    ]  # fmt: skip
    return raw


@pytest.mark.slow
def test_megaflow_train_closes_with_each_held_out_sets_figures(
    tmp_path: Path, policy: Path
) -> None:
    cfg = tmp_path / "train.yaml"
    cfg.write_text(yaml.safe_dump(_config(tmp_path, policy)))
    res = CliRunner().invoke(app, ["train", str(cfg)], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    (curve_file,) = (tmp_path / "out").glob("*/curve.json")
    evals = json.loads(curve_file.read_text())["evals"]
    assert [e["step"] for e in evals] == [0, 1]
    lines = res.output.splitlines()
    for name, samples in (("sums", 2), ("more", 1)):
        (line,) = [x for x in lines if x.startswith(f"held-out {name}: ")]
        parts = []
        for e in evals:
            f = e["sets"][name]
            assert f["samples"] == samples
            parts.append(
                f"{f['reward_mean']:.3f} [{f['ci_low']:.3f}, {f['ci_high']:.3f}] n {samples} "
                f"at step {e['step']}"
            )
        assert line == f"held-out {name}: {' -> '.join(parts)}"
    assert lines.index(next(x for x in lines if x.startswith("held-out reward: "))) < min(
        lines.index(x) for x in lines if x.startswith(("held-out sums: ", "held-out more: "))
    )

"""``train.held_out`` as task sets: each bad held-out set exits 2 naming its field, and
the old form (a SWE-bench-style split) reads as before."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.config import parse_config
from megaflow.train.loop_config import HeldOutConfig
from tests.train_loop.conftest import TASKS, train_config
from tests.train_loop.test_heldout_sets import HELD_FN, mixed_with_held_out_sets


def _train(tmp: Path, raw: dict[str, Any], *command: str) -> tuple[int, str]:
    cfg = tmp / "train.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    res = CliRunner().invoke(app, [*command, str(cfg)], env={"COLUMNS": "250"})
    return res.exit_code, " ".join(res.output.split())  # the table may wrap a line


def test_bad_held_out_sets_exit_2_naming_the_field(tmp_path: Path, policy: Path) -> None:
    good = mixed_with_held_out_sets(tmp_path, policy)

    raw = copy.deepcopy(good)  # a held-out set that is not there
    raw["train"]["held_out"][0]["path"] = str(tmp_path / "nowhere.jsonl")
    code, out = _train(tmp_path, raw, "train")
    assert code == 2, out
    assert "train.held_out[0].path" in out
    assert "nowhere.jsonl" in out
    code, out = _train(tmp_path, raw, "config", "validate")  # found before a run, too
    assert code == 2, out
    assert "train.held_out[0].path" in out

    raw = copy.deepcopy(good)  # QA tasks without a grader: the run's swebench ignores them
    raw["train"]["held_out"] = raw["train"]["held_out"][0]
    del raw["train"]["held_out"]["grading"]
    code, out = _train(tmp_path, raw, "train")
    assert code == 2, out
    assert "train.held_out.grading is needed" in out

    raw = copy.deepcopy(good)  # the train QA set held out: its rewards say nothing
    raw["train"]["held_out"][0]["path"] = raw["train"]["sets"][1]["path"]
    code, out = _train(tmp_path, raw, "train")
    assert code == 2, out
    assert "train.held_out[0] shares 2 task(s) with train.sets (qa.q0, qa.q1)" in out

    raw = copy.deepcopy(good)  # a held-out instance of the SWE train set
    raw["train"]["held_out"][1]["path"] = str(TASKS / "train.jsonl")
    code, out = _train(tmp_path, raw, "train")
    assert code == 2, out
    assert "train.held_out[1] shares 1 task(s) with train.sets" in out

    raw = copy.deepcopy(good)  # two held-out sets of one name
    raw["train"]["held_out"][1]["name"] = "qa"
    code, out = _train(tmp_path, raw, "train")
    assert code == 2, out
    assert "held_out: set name(s) used twice: qa" in out

    raw = copy.deepcopy(good)  # a weight is a train set's, not a held-out set's
    raw["train"]["held_out"][1]["weight"] = 1.0
    code, out = _train(tmp_path, raw, "train")
    assert code == 2, out
    assert "train.held_out[1].weight" in out
    assert "unknown field" in out

    raw = copy.deepcopy(good)  # a set of its own kind, but no name to report it by
    raw["train"]["held_out"] = raw["train"]["held_out"][0]
    del raw["train"]["held_out"]["name"]
    code, out = _train(tmp_path, raw, "train")
    assert code == 2, out
    assert (
        "train.held_out: Value error, a held-out set with its own type or grading needs a name"
        in out
    )

    raw = copy.deepcopy(good)  # in a list, every set is named
    del raw["train"]["held_out"][1]["name"]
    code, out = _train(tmp_path, raw, "train")
    assert code == 2, out
    assert "train.held_out: Value error, entry 1 has no name" in out

    raw = copy.deepcopy(good)  # a held-out set's ids to keep must be its own
    raw["train"]["held_out"][0]["instances"] = ["h1", "h9"]
    code, out = _train(tmp_path, raw, "train")
    assert code == 2, out
    assert "train.held_out[0].instances names unknown instance(s): h9" in out


def test_held_out_forms(tmp_path: Path, policy: Path) -> None:
    old = parse_config(train_config(tmp_path, policy))  # {path, limit}: instances, as ever
    assert old.train is not None
    assert isinstance(old.train.held_out, HeldOutConfig)
    assert old.train.held_out.limit == 2
    assert old.train.held_out_sets() == []
    one = train_config(tmp_path, policy)
    one["train"]["held_out"] = {
        "name": "qa", "type": "jsonl", "path": "qa.jsonl",
        "grading": {"type": "python", "function": HELD_FN},
    }  # fmt: skip
    single = parse_config(one).train
    assert single is not None
    assert isinstance(single.held_out, HeldOutConfig)
    assert [s.name for s in single.held_out_sets()] == ["qa"]
    assert single.held_out_field(0) == "train.held_out"
    many = parse_config(mixed_with_held_out_sets(tmp_path, policy)).train
    assert many is not None
    assert [s.name for s in many.held_out_sets()] == ["qa", "swe"]
    assert many.held_out_field(1) == "train.held_out[1]"

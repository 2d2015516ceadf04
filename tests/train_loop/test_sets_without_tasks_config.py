"""``tasks`` is optional only where ``train.sets`` gives the prompts: a config with
neither has nothing to train on and exits 2 naming ``tasks``; a sets-only config
whose held-out split would come from ``tasks`` names ``train.held_out.path``; and
``megaflow run``, which runs ``tasks``, refuses a sets-only config naming it."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.config import parse_config
from megaflow.core.errors import ConfigError
from tests.train_loop.conftest import train_config
from tests.train_loop.test_sets_without_tasks import FN, qa_file

MISSING = "tasks: required field is missing: the tasks to run (a train run may name its"


def _sets_only(tmp: Path, policy: Path) -> dict[str, Any]:
    raw = train_config(tmp, policy)
    del raw["tasks"]
    graded = {"type": "python", "function": FN}
    raw["train"]["sets"] = [
        {"name": "qa", "type": "jsonl", "path": str(qa_file(tmp / "qa.jsonl", 0, 2)),
         "grading": graded},
    ]  # fmt: skip
    raw["train"]["held_out"] = {
        "name": "qa", "type": "jsonl", "path": str(qa_file(tmp / "held.jsonl", 10, 1)),
        "grading": graded,
    }  # fmt: skip
    return raw


def _cli(tmp: Path, raw: dict[str, Any], *command: str) -> tuple[int, str]:
    cfg = tmp / "train.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    res = CliRunner().invoke(app, [*command, str(cfg)], env={"COLUMNS": "250"})
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.exit_code, " ".join(res.output.split())  # the table may wrap a line


def test_a_sets_only_config_parses_without_tasks(tmp_path: Path, policy: Path) -> None:
    raw = _sets_only(tmp_path, policy)
    cfg = parse_config(raw)
    assert cfg.tasks is None
    assert cfg.train is not None
    assert cfg.train.sets is not None
    code, out = _cli(tmp_path, raw, "config", "validate")
    assert code == 0, out
    assert "tasks from train.sets" in out
    raw["tasks"] = None  # an explicit null beside train.sets: the same
    assert parse_config(raw).tasks is None


@pytest.mark.parametrize("tasks", ["absent", "null"])
def test_neither_tasks_nor_sets_exits_2_naming_tasks(
    tmp_path: Path, policy: Path, tasks: str
) -> None:
    raw = _sets_only(tmp_path, policy)
    del raw["train"]["sets"]
    if tasks == "null":
        raw["tasks"] = None
    with pytest.raises(ConfigError) as err:
        parse_config(raw)
    assert err.value.errors[0][0] == "tasks"
    table = "│ tasks │ required field is missing: the tasks to run"  # config validate's
    for command, said in ((("train",), MISSING), (("config", "validate"), table),
                          (("run",), MISSING)):  # fmt: skip
        code, out = _cli(tmp_path, raw, *command)
        assert code == 2, (command, out)
        assert said in out, (command, out)


def test_held_out_split_without_tasks_names_its_path(tmp_path: Path, policy: Path) -> None:
    raw = _sets_only(tmp_path, policy)
    raw["train"]["held_out"] = {"limit": 1}  # the old form: a split of the run's tasks
    code, out = _cli(tmp_path, raw, "train")
    assert code == 2, out
    assert "train.held_out.path is needed: the run has no tasks to take the split from" in out
    held = copy.deepcopy(raw)  # given a path, the old form works without tasks too
    swe = Path(__file__).resolve().parents[2] / "tasks" / "settings-fix" / "heldout.jsonl"
    held["train"]["held_out"] = {"path": str(swe), "limit": 1}
    from megaflow.app.training.splits import load_splits

    splits = load_splits(parse_config(held), None)
    assert splits.train == []  # the sets are the prompts: no train split
    assert len(splits.held_out) == 1


def test_megaflow_run_refuses_a_sets_only_config_naming_tasks(tmp_path: Path, policy: Path) -> None:
    code, out = _cli(tmp_path, _sets_only(tmp_path, policy), "run")
    assert code == 2, out
    assert "the config has no tasks to run (its train.sets serve megaflow train only)" in out


def test_a_sets_only_config_is_a_run_config_for_other_commands(
    tmp_path: Path, policy: Path
) -> None:
    """Commands that tell a run config from a cluster or plan file by its keys read a
    sets-only config as a run config (its storage, its trainer)."""
    raw = _sets_only(tmp_path, policy)
    path = tmp_path / "train.yaml"
    path.write_text(json.dumps(raw))
    from megaflow.cli.common import storage_of

    assert storage_of(path).metadata.model_dump()["path"] == str(tmp_path / "m.db")

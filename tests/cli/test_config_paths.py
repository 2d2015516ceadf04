"""`megaflow config validate` refuses task paths a run would not find (exit 2, the
field named), and takes them where a run looks: as given or beside the config."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from megaflow.cli.main import app

runner = CliRunner()
ROOT = Path(__file__).parents[2]


def said(output: str) -> str:
    return " ".join(output.split())


def _write(tmp: Path, **over: object) -> Path:
    cfg = yaml.safe_load((ROOT / "examples" / "train-quickstart.yaml").read_text())
    cfg["tasks"]["path"] = str(ROOT / cfg["tasks"]["path"])
    cfg["train"]["held_out"]["path"] = str(ROOT / cfg["train"]["held_out"]["path"])
    for dotted, value in over.items():
        *head, last = dotted.split("__")
        node = cfg
        for key in head:
            node = node[key]
        node[last] = value
    path = tmp / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_the_quickstart_config_validates_with_its_paths(tmp_path: Path) -> None:
    res = runner.invoke(app, ["config", "validate", str(_write(tmp_path))])
    assert res.exit_code == 0, res.output
    assert "ok" in res.output


@pytest.mark.parametrize(
    ("field", "dotted"),
    [("tasks.path", "tasks__path"), ("train.held_out.path", "train__held_out__path")],
)
def test_a_missing_task_path_exits_2_naming_its_field(
    tmp_path: Path, field: str, dotted: str
) -> None:
    path = _write(tmp_path, **{dotted: "tasks/no-such-set.jsonl"})
    res = runner.invoke(app, ["config", "validate", str(path)], env={"COLUMNS": "200"})
    assert res.exit_code == 2
    assert "Traceback" not in res.output
    out = said(res.output)
    assert field in out
    assert "tasks/no-such-set.jsonl does not exist" in out


@pytest.mark.parametrize("command", ["run", "train"])
@pytest.mark.parametrize(
    ("field", "dotted"),
    [("tasks.path", "tasks__path"), ("train.held_out.path", "train__held_out__path")],
)
def test_run_and_train_refuse_a_missing_task_path_naming_its_field(
    tmp_path: Path, command: str, field: str, dotted: str
) -> None:
    """As `config validate` does: exit 2 with the field, before any work starts."""
    cfg = _write(tmp_path, **{dotted: "tasks/no-such-set.jsonl"})
    res = runner.invoke(
        app, [command, str(cfg), "--no-check-models"] if command == "run" else [command, str(cfg)]
    )
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    assert f"{field}: tasks/no-such-set.jsonl does not exist" in said(res.output)


def test_a_path_beside_the_config_is_found(tmp_path: Path) -> None:
    (tmp_path / "set.jsonl").write_text((ROOT / "tasks/settings-fix/train.jsonl").read_text())
    res = runner.invoke(app, ["config", "validate", str(_write(tmp_path, tasks__path="set.jsonl"))])
    assert res.exit_code == 0, res.output

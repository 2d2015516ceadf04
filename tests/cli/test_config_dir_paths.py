"""A config's relative model directories are found beside it, from any directory.

``megaflow train path/to/run.yaml`` run from elsewhere finds the policy and
tokenizer its config names relative to its own folder (as it finds the task
sets), and a directory that is nowhere is refused with exit 2, naming the
field, before anything starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.config import load_config
from megaflow.config.paths import missing_model_dirs

runner = CliRunner()
ROOT = Path(__file__).parents[2]


def _project(tmp: Path, model: dict[str, Any], train: dict[str, Any] | None = None) -> Path:
    """``tmp/proj/run.yaml`` (the quickstart's, its task sets and model relative to it)."""
    proj = tmp / "proj"
    (proj / "sets").mkdir(parents=True)
    cfg = yaml.safe_load((ROOT / "examples" / "train-quickstart.yaml").read_text())
    for name in ("train", "heldout"):
        src = ROOT / "tasks" / "settings-fix" / f"{name}.jsonl"
        (proj / "sets" / f"{name}.jsonl").write_text(src.read_text())
    cfg["tasks"]["path"] = "sets/train.jsonl"
    cfg["train"]["held_out"]["path"] = "sets/heldout.jsonl"
    cfg["model"] = {**model, "temperature": 1.0}  # the sampler's, as train.temperature
    cfg["train"].update(train or {})
    path = proj / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _elsewhere(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    away = tmp / "elsewhere"
    away.mkdir()
    monkeypatch.chdir(away)


def test_model_directories_are_found_beside_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _project(tmp_path, {"type": "transformers", "model": "models/policy"})
    (path.parent / "models" / "policy").mkdir(parents=True)
    _elsewhere(tmp_path, monkeypatch)
    cfg = load_config(Path("..") / "proj" / "run.yaml")
    assert cfg.model.model == str(path.parent.resolve() / "models" / "policy")  # type: ignore[union-attr]
    assert missing_model_dirs(cfg, path.parent) == []


def test_an_engines_tokenizer_and_the_policy_are_found_beside_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = {"type": "sglang", "base_url": "http://127.0.0.1:1", "tokenizer": "tok"}
    path = _project(tmp_path, engine, {"policy": "tok"})
    (path.parent / "tok").mkdir()
    _elsewhere(tmp_path, monkeypatch)
    cfg = load_config(path)
    assert cfg.model.tokenizer == str(path.parent / "tok")  # type: ignore[union-attr]
    assert cfg.train is not None
    assert cfg.train.policy == str(path.parent / "tok")


def test_a_path_that_exists_from_here_is_taken_as_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _project(tmp_path, {"type": "transformers", "model": "policy"})
    (path.parent / "policy").mkdir()
    _elsewhere(tmp_path, monkeypatch)
    Path("policy").mkdir()  # as make run names .megaflow/models/... from the repository root
    assert load_config(path).model.model == "policy"  # type: ignore[union-attr]


def test_train_refuses_a_missing_model_directory_naming_the_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _project(tmp_path, {"type": "transformers", "model": "models/none"})
    _elsewhere(tmp_path, monkeypatch)
    res = runner.invoke(app, ["train", str(path)], env={"COLUMNS": "200"})
    assert res.exit_code == 2, res.output
    out = " ".join(res.output.split())
    assert "model.model: models/none is not a directory" in out
    assert "looked from here and beside the config" in out
    assert "Traceback" not in out

"""`megaflow train plan` on a run config (the quickstart's), the one name of the
planner, and help without "<bool>" metavars at 80 and 120 columns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import typer
import yaml
from safetensors.numpy import save_file
from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.cli.train_plan_cmd import params_text

runner = CliRunner()
ROOT = Path(__file__).parents[2]


def said(output: str) -> str:
    return " ".join(output.split())


def _model(folder: Path) -> int:
    """A tiny llama directory (config.json, tied weights in safetensors); its parameters."""
    folder.mkdir()
    h, f, vocab, layers = 16, 32, 50, 2
    (folder / "config.json").write_text(
        json.dumps(
            {
                "model_type": "llama",
                "hidden_size": h,
                "intermediate_size": f,
                "num_hidden_layers": layers,
                "num_attention_heads": 2,
                "num_key_value_heads": 2,
                "vocab_size": vocab,
                "tie_word_embeddings": True,
            }
        )
    )
    tensors = {"embed": np.zeros((vocab, h), np.float32), "norm": np.zeros(h, np.float32)}
    for i in range(layers):
        tensors[f"l{i}.attn"] = np.zeros((4 * h, h), np.float32)
        tensors[f"l{i}.mlp"] = np.zeros((3 * f, h), np.float32)
        tensors[f"l{i}.norms"] = np.zeros(2 * h, np.float32)
    save_file(tensors, str(folder / "model.safetensors"))
    return sum(t.size for t in tensors.values())


def _quickstart(tmp: Path, model: Path) -> Path:
    """examples/train-quickstart.yaml with its paths made absolute and the model at ``model``."""
    cfg = yaml.safe_load((ROOT / "examples" / "train-quickstart.yaml").read_text())
    cfg["tasks"]["path"] = str(ROOT / cfg["tasks"]["path"])
    cfg["train"]["held_out"]["path"] = str(ROOT / cfg["train"]["held_out"]["path"])
    cfg["model"]["model"] = str(model)
    path = tmp / "train.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_train_plan_takes_the_quickstart_config_and_counts_its_parameters(
    tmp_path: Path,
) -> None:
    n = _model(tmp_path / "policy")
    res = runner.invoke(
        app, ["train", "plan", str(_quickstart(tmp_path, tmp_path / "policy"))],
        env={"COLUMNS": "120"},
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert f"{params_text(n)} parameters" in said(res.output)
    assert params_text(n) == f"{n / 1e3:.2f}K"
    assert "0.00B" not in res.output
    assert "plan: " in res.output


@pytest.mark.parametrize("columns", [80, 120])
def test_train_plan_keeps_every_figure_whole(tmp_path: Path, columns: int) -> None:
    """No strategy cut to an ellipsis, no column squeezed, no note lost, and a small
    model's sizes in units that show them (never 0.0 GB for a state it has)."""
    _model(tmp_path / "policy")
    cfg = str(_quickstart(tmp_path, tmp_path / "policy"))
    res = runner.invoke(app, ["train", "plan", cfg], env={"COLUMNS": str(columns)})
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert all(len(line) <= columns for line in lines), res.output
    assert "…" not in res.output
    plan = json.loads(runner.invoke(app, ["train", "plan", cfg, "--json"]).stdout)
    for e in plan["estimates"]:
        assert any(line.startswith(f"│ {e['strategy']} ") for line in lines), res.output
        if e["note"]:
            assert e["note"] in said(res.output), (e["note"], res.output)
    assert "0.0 GB" not in res.output, res.output
    assert "state 0.0" not in res.output


def test_train_plan_says_what_it_needs_when_the_model_is_not_built(tmp_path: Path) -> None:
    res = runner.invoke(app, ["train", "plan", str(_quickstart(tmp_path, tmp_path / "none"))])
    assert res.exit_code == 2
    assert "Traceback" not in res.output
    out = said(res.output)
    assert "model.model" in out
    assert "has no config.json yet" in out
    assert "make run" in out


def test_params_are_written_as_people_write_them() -> None:
    assert [params_text(x) for x in (399_744, 494e6, 7.6e9)] == ["399.74K", "494.00M", "7.60B"]


def test_plan_is_one_command_with_a_hidden_alias(tmp_path: Path) -> None:
    top = runner.invoke(app, ["--help"], env={"COLUMNS": "120"})
    names = [line.split()[0] for line in top.output.splitlines() if line.startswith("  ")]
    assert "plan" not in names
    assert "train" in names
    n = _model(tmp_path / "policy")
    alias = runner.invoke(app, ["plan", str(_quickstart(tmp_path, tmp_path / "policy"))])
    assert alias.exit_code == 0, alias.output
    assert f"{params_text(n)} parameters" in said(alias.output)


def _paths(cmd: Any, prefix: list[str]) -> list[list[str]]:
    """Every command and group under ``cmd`` (typer's own click classes)."""
    out = [prefix]
    for name, sub in getattr(cmd, "commands", {}).items():
        out += _paths(sub, [*prefix, name])
    return out


@pytest.mark.parametrize("columns", ["80", "120"])
def test_no_help_shows_a_bool_metavar(columns: str) -> None:
    paths = _paths(typer.main.get_command(app), [])
    assert len(paths) > 25  # every command and group, not a few
    for path in paths:
        res = runner.invoke(app, [*path, "--help"], env={"COLUMNS": columns})
        assert res.exit_code == 0, (path, res.output)
        assert "<bool>" not in res.output, (path, res.output)
        assert "BOOLEAN" not in res.output, path

"""A learned checkpoint in the live scheduler: a real job runs under it, and a
missing checkpoint stops ``megaflow run`` before any work (exit 2)."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.scheduler.learned_net import save_checkpoint
from megaflow.sim.learn import _export, _nets

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def _config(tmp: Path, checkpoint: Path) -> Path:
    cfg = yaml.safe_load((ROOT / "examples" / "quickstart.yaml").read_text())
    cfg["samples"] = 1
    cfg["tasks"] = {"type": "swebench", "path": str(ROOT / "tasks" / "mini-swe"), "limit": 2}
    cfg["scheduler"] = {"policy": {"type": "learned", "checkpoint": str(checkpoint)},
                        "max_concurrency": 2}  # fmt: skip
    cfg["storage"] = {
        "metadata": {"type": "sqlite", "path": str(tmp / "m.db")},
        "artifacts": {"type": "local", "root": str(tmp / "art")},
    }
    path = tmp / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_a_real_job_runs_under_a_learned_checkpoint(tmp_path: Path) -> None:
    ckpt = tmp_path / "policy.safetensors"
    save_checkpoint(_export(*_nets(32, None), {}), ckpt)
    res = runner.invoke(app, ["run", str(_config(tmp_path, ckpt))], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "check pass: run resolves >= 100%" in res.output


def test_a_missing_checkpoint_stops_the_run_before_it_starts(tmp_path: Path) -> None:
    missing = tmp_path / "none.safetensors"
    res = runner.invoke(app, ["run", str(_config(tmp_path, missing))], env={"COLUMNS": "200"})
    assert res.exit_code == 2, res.output
    assert "scheduler.policy" in res.output
    assert "does not exist" in res.output
    assert not (tmp_path / "m.db").exists()  # nothing was started

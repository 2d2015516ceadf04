"""The bundled Harbor set through `megaflow tasks convert --from harbor` and
`megaflow run`: real image builds from a local base image, the agent and the
verifier in containers; the oracle resolves every task, the empty control none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from megaflow.cli.main import app

pytestmark = [pytest.mark.container, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
HARBOR_MINI = ROOT / "tasks" / "harbor-mini"
BASE = "localhost/megaflow-base:latest"
runner = CliRunner()


def _config(tmp: Path, tasks: Path, url: str) -> Path:
    cfg: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "harbor-mini.yaml").read_text())
    cfg["tasks"]["path"] = str(tasks)
    cfg["environment"]["runtime"].update(base_url=url, namespace="harbor-mini")
    cfg["storage"] = {
        "metadata": {"type": "sqlite", "path": str(tmp / "m.db")},
        "artifacts": {"type": "local", "root": str(tmp / "art")},
    }
    cfg["samples"] = 1
    path = tmp / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_oracle_resolves_every_harbor_task_and_the_empty_control_none(
    tmp_path: Path, podman_service: Any
) -> None:
    tagged = podman_service.podman("tag", podman_service.image, BASE)
    assert tagged.returncode == 0, tagged.stderr
    out = tmp_path / "harbor-mini.jsonl"
    args = ["tasks", "convert", "--from", "harbor", str(HARBOR_MINI), "--out", str(out),
            "--engine", podman_service.url]  # fmt: skip
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "wrote 8 Harbor tasks" in res.output
    # hello-file and json-settings have the same environment/: one image, built once
    # (the Podman service is the session's: another test of this worker may have built
    # some of these images already, and those are found by their tag)
    built, cached = res.output.count(": built in"), res.output.count(": cached")
    assert built + cached == 8, res.output
    assert built <= 7, res.output
    assert cached >= 1, res.output
    again = runner.invoke(app, [*args, "--force"])  # unchanged folders: found by their tag
    assert again.exit_code == 0, again.output
    assert again.output.count(": cached") == 8, again.output

    cfg = _config(tmp_path, out, podman_service.url)
    res = runner.invoke(app, ["run", str(cfg)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "check pass: run resolves >= 100% (got 100.0%)" in res.output, res.output
    assert "check pass: control resolves <= 0% (got 0.0%)" in res.output, res.output

    # the stored final files, verified again in fresh containers: the same rewards
    run = next(x for x in res.output.splitlines() if x.startswith("run ")).split()[1].rstrip(":")
    again = runner.invoke(app, ["regrade", run, "--config", str(cfg)], env={"COLUMNS": "200"})
    assert again.exit_code == 0, again.output
    assert "8 samples: 0 changed, 0 skipped" in again.output, again.output


def test_a_broken_harbor_folder_is_a_clear_error(tmp_path: Path) -> None:
    task = tmp_path / "t"
    (task / "tests").mkdir(parents=True)
    (task / "task.toml").write_text("[environment\n")
    res = runner.invoke(app, ["tasks", "convert", "--from", "harbor", str(tmp_path),
                              "--out", str(tmp_path / "o.jsonl")])  # fmt: skip
    assert res.exit_code == 2
    assert "task.toml: not valid TOML" in res.output
    (task / "task.toml").write_text('[environment]\nmemory = "lots"\n')
    (task / "instruction.md").write_text("do it")
    (task / "tests" / "test.sh").write_text("exit 0")
    (task / "environment").mkdir()
    (task / "environment" / "Dockerfile").write_text("FROM x\n")
    res = runner.invoke(app, ["tasks", "convert", "--from", "harbor", str(tmp_path),
                              "--out", str(tmp_path / "o.jsonl")])  # fmt: skip
    assert res.exit_code == 2
    assert "environment.memory: 'lots' is not a size" in res.output

"""Instances whose repository is inside a container image, and converting to them.

Running such an instance (preparation and grading in its image) is tested
against a real Podman service in ``tests/environment/test_images.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.core.errors import InvalidInput
from megaflow.datasets import ImageSource, SWEInstance, load_instances
from megaflow.datasets.prepare import _script, environment_spec
from megaflow.datasets.sources import check_source_size, source_archive
from megaflow.environment.abstract import EnvironmentSpec
from tests.datasets.conftest import make_calc_repo
from tests.datasets.test_convert import published

runner = CliRunner()


def _rows(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    _, instance = make_calc_repo(tmp_path / "repos")
    rows = tmp_path / "swe-bench.jsonl"
    rows.write_text(json.dumps(published(instance)) + "\n")
    return rows, instance


def _convert(*args: str) -> Any:
    return runner.invoke(app, ["tasks", "convert", *args], env={"COLUMNS": "1000"})


def test_convert_names_an_image_per_instance_and_the_set_loads(tmp_path: Path) -> None:
    rows, instance = _rows(tmp_path)
    out = tmp_path / "set" / "instances.jsonl"
    result = _convert(str(rows), "-o", str(out), "--source", "image",
                      "--image-template", "registry.local/{instance_id}:latest")  # fmt: skip
    assert result.exit_code == 0, result.output
    written = json.loads(out.read_text())
    assert written["megaflow_source"] == {
        "type": "image", "image": "registry.local/calc__calc-1:latest", "path": "/testbed"
    }  # fmt: skip
    assert written["FAIL_TO_PASS"] == instance["FAIL_TO_PASS"]  # decoded from JSON text
    (loaded,) = load_instances(out)  # no host path to resolve or measure
    assert loaded.megaflow_source == ImageSource(image="registry.local/calc__calc-1:latest")
    listed = runner.invoke(app, ["tasks", "ls", str(out)], env={"COLUMNS": "1000"})
    assert listed.exit_code == 0, listed.output
    assert "image" in listed.output


def test_convert_to_images_refuses_what_it_cannot_write(tmp_path: Path) -> None:
    rows, _ = _rows(tmp_path)
    out = str(tmp_path / "out.jsonl")
    no_template = _convert(str(rows), "-o", out, "--source", "image")
    assert no_template.exit_code == 2
    assert "--image-template" in no_template.output
    unknown = _convert(str(rows), "-o", out, "--source", "image", "--image-template", "r/{id}")
    assert unknown.exit_code == 2
    assert "unknown placeholder 'id'" in unknown.output
    spaced = _convert(str(rows), "-o", out, "--source", "image",
                      "--image-template", "r/{instance_id} x")  # fmt: skip
    assert spaced.exit_code == 2
    assert "megaflow_source.image" in spaced.output
    relative = _convert(str(rows), "-o", out, "--source", "image", "--image-template",
                        "r/{instance_id}", "--repo-path", "testbed")  # fmt: skip
    assert relative.exit_code == 2
    assert "megaflow_source.image.path" in relative.output  # pydantic names the tag
    no_repos = _convert(str(rows), "-o", out, "--source", "dir")
    assert no_repos.exit_code == 2
    assert "--repos" in no_repos.output
    assert not Path(out).exists()


def test_an_image_source_runs_in_its_image_and_never_reads_the_host(tmp_path: Path) -> None:
    _, raw = make_calc_repo(tmp_path)
    raw["megaflow_source"] = {"type": "image", "image": "r/calc:1", "path": "/src/calc"}
    instance = SWEInstance.model_validate(raw)
    spec = environment_spec(instance, EnvironmentSpec(image="host", env={"A": "1"}))
    assert spec.image == "r/calc:1"
    assert spec.env["A"] == "1"
    assert spec.workdir == "/workspace"
    assert check_source_size(instance.megaflow_source) == 0
    with pytest.raises(InvalidInput, match="inside the image"):
        source_archive(instance.megaflow_source)
    script = _script(instance)
    assert "mv /src/calc /.megaflow-image-repo" in script
    assert "git clean -ffdq\n" in script  # ignored files (the image's build) stay
    with pytest.raises(ValidationError, match="absolute path of a directory"):
        ImageSource(image="r/x", path="/")

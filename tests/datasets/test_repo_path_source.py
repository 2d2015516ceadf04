"""A row without ``megaflow_source`` takes its ``repo_path`` folder as a ``dir`` source."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.core.errors import InvalidInput
from megaflow.datasets import load_instances
from tests.datasets.conftest import make_calc_repo, write_jsonl


def test_repo_path_beside_the_set_is_the_source(tmp_path: Path) -> None:
    repo, inst = make_calc_repo(tmp_path)
    del inst["megaflow_source"]
    path = write_jsonl(tmp_path / "set.jsonl", [{**inst, "repo_path": "calc"}])
    (loaded,) = load_instances(path)
    assert loaded.megaflow_source.type == "dir"
    assert loaded.megaflow_source.path == str(repo.resolve())


def test_an_explicit_source_wins_over_repo_path(tmp_path: Path) -> None:
    repo, inst = make_calc_repo(tmp_path)
    (tmp_path / "other").mkdir()
    path = write_jsonl(tmp_path / "set.jsonl", [{**inst, "repo_path": "other"}])
    assert load_instances(path)[0].megaflow_source.path == str(repo.resolve())


def test_repo_path_outside_the_set_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    _, inst = make_calc_repo(outside)
    del inst["megaflow_source"]
    (tmp_path / "set").mkdir()
    path = write_jsonl(tmp_path / "set" / "set.jsonl", [{**inst, "repo_path": "../outside/calc"}])
    with pytest.raises(InvalidInput, match=r"megaflow_source\.path.*outside the task set"):
        load_instances(path)
    # a source root that holds it makes it loadable, as for megaflow_source
    assert load_instances(path, source_roots=[outside])[0].megaflow_source.type == "dir"


@pytest.mark.parametrize("repo_path", ["missing", "calc/calc.py", "", 7])
def test_repo_path_not_a_folder_errors_as_before(tmp_path: Path, repo_path: object) -> None:
    _, inst = make_calc_repo(tmp_path)
    del inst["megaflow_source"]
    path = write_jsonl(tmp_path / "set.jsonl", [{**inst, "repo_path": repo_path}])
    result = CliRunner().invoke(app, ["tasks", "ls", str(path)])
    assert result.exit_code == 2, result.output
    assert "field 'megaflow_source': Field required" in result.output
    assert "Traceback" not in result.output

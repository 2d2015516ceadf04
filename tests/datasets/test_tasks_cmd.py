"""Task specs from instances, and the ``megaflow tasks`` commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.core.tasks import TaskType
from megaflow.datasets import instance_of, load_instances, to_task_specs
from tests.datasets.conftest import MINI_SWE, make_calc_repo, write_jsonl

PAYLOAD_KEYS = {
    "instance_id",
    "problem_statement",
    "patch",
    "test_patch",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
    "repo",
    "base_commit",
    "megaflow_source",
}


def test_task_specs_carry_the_instance() -> None:
    instances = load_instances(MINI_SWE)[:3]
    specs = to_task_specs(instances, "run-1", samples=2, task_type=TaskType.EVAL, agent="builtin")
    assert len(specs) == 6
    assert len({s.id for s in specs}) == 6
    first = specs[0]
    assert first.id == f"run-1/{instances[0].instance_id}/0"
    assert (first.sample, specs[1].sample) == (0, 1)
    assert first.type is TaskType.EVAL
    assert first.agent == "builtin"
    assert set(first.payload) >= PAYLOAD_KEYS
    assert Path(first.payload["megaflow_source"]["path"]).is_absolute()
    json.dumps(first.payload)  # plain JSON, storable as is
    assert instance_of(first) == instances[0]
    with pytest.raises(ValueError):
        to_task_specs(instances, "run-1", samples=0)


def test_ls_lists_the_bundled_set() -> None:
    result = CliRunner().invoke(app, ["tasks", "ls", str(MINI_SWE)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert f"{len(load_instances(MINI_SWE))} instances" in result.output
    # a long id folds onto the next line of its cell at a narrow terminal, never cut
    ids = "".join(line.split("│")[1].strip() for line in result.output.splitlines() if "│" in line)
    assert "mini-swe__pagekit-1" in ids


def test_ls_reports_a_bad_set(tmp_path: Path) -> None:
    _, inst = make_calc_repo(tmp_path)
    del inst["test_patch"]
    path = write_jsonl(tmp_path / "bad.jsonl", [inst])
    result = CliRunner().invoke(app, ["tasks", "ls", str(path)])
    assert result.exit_code == 2
    assert "calc__calc-1" in result.output
    assert "test_patch" in result.output


@pytest.mark.slow
def test_validate_passes_good_and_flags_broken_instances(tmp_path: Path) -> None:
    _, good = make_calc_repo(tmp_path)
    no_fix = {**good, "instance_id": "calc-no-fix", "patch": good["test_patch"]}
    always_passes = {**good, "instance_id": "calc-trivial", "FAIL_TO_PASS": good["PASS_TO_PASS"]}
    path = write_jsonl(tmp_path / "set.jsonl", [good, no_fix, always_passes])
    root = str(tmp_path / "boxes")
    runner = CliRunner()
    args = ["tasks", "validate", str(path), "-j", "3", "--sandbox-root", root]
    ok = runner.invoke(app, [*args, "--only", "calc__calc-1"], env={"COLUMNS": "200"})
    assert ok.exit_code == 0, ok.output
    assert "gold resolves 1/1, empty resolves 0/1" in ok.output
    bad = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert bad.exit_code == 1, bad.output
    assert "2 checks misbehave" in bad.output
    assert "calc-no-fix" in bad.output
    assert "gold patch does not resolve" in bad.output
    assert "calc-trivial" in bad.output
    assert "already resolves" in bad.output

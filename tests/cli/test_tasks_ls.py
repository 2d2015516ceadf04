"""``megaflow tasks ls``: ``--json``, and ids never cut off in a narrow terminal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.datasets import load_instances
from tests.datasets.conftest import MINI_SWE, make_calc_repo, write_jsonl

LONG_ID = "averyveryverylongorganisation__averyveryverylongrepositoryname-123456"


def test_ls_json_lists_every_instance() -> None:
    result = CliRunner().invoke(app, ["tasks", "ls", str(MINI_SWE), "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    instances = load_instances(MINI_SWE)
    assert [r["instance_id"] for r in rows] == [i.instance_id for i in instances]
    first, inst = rows[0], instances[0]
    assert first["fail_to_pass"] == len(inst.FAIL_TO_PASS)
    assert first["pass_to_pass"] == len(inst.PASS_TO_PASS)
    assert first["source"] == inst.megaflow_source.model_dump(mode="json")
    assert first["test_format"] == "pytest"
    assert first["issue"] == inst.problem_statement.strip().splitlines()[0]


def test_ids_are_not_cut_at_80_columns(tmp_path: Path) -> None:
    _, inst = make_calc_repo(tmp_path)
    rows = [{**inst, "instance_id": f"{LONG_ID}{n}"} for n in range(2)]
    path = write_jsonl(tmp_path / "set.jsonl", rows)
    result = CliRunner().invoke(app, ["tasks", "ls", str(path)], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.output.splitlines()) <= 80
    cells = [
        "".join(line.split("│")[1].split()) for line in result.output.splitlines() if "│" in line
    ]
    for n in range(2):
        assert f"{LONG_ID}{n}" in "".join(cells), result.output


def test_ls_json_of_a_bad_set_exits_2(tmp_path: Path) -> None:
    _, inst = make_calc_repo(tmp_path)
    del inst["problem_statement"]
    path = write_jsonl(tmp_path / "set.jsonl", [inst])
    result = CliRunner().invoke(app, ["tasks", "ls", str(path), "--json"])
    assert result.exit_code == 2
    assert "problem_statement" in result.output


@pytest.mark.parametrize("columns", [80, 120])
def test_only_the_issue_gives_way_to_the_terminal(columns: int) -> None:
    result = CliRunner().invoke(app, ["tasks", "ls", str(MINI_SWE)], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= columns
    rows = [line for line in lines if line.startswith("│")]
    instances = load_instances(MINI_SWE)
    assert len(rows) == len(instances)  # one line per instance: nothing wraps
    for row, inst in zip(rows, instances, strict=True):
        cells = [c.strip() for c in row.strip("│").split("│")]
        assert cells[0] == inst.instance_id
        assert cells[-3:-1] == [str(len(inst.FAIL_TO_PASS)), str(len(inst.PASS_TO_PASS))]
        assert cells[-4] == inst.megaflow_source.type
        if columns == 120:
            assert cells[1] == inst.repo
        issue = inst.problem_statement.strip().splitlines()[0]
        assert issue.startswith(cells[-1].removesuffix("…"))
        assert len(cells[-1]) >= 20


def test_a_folder_of_harbor_tasks_is_told_how_to_convert(tmp_path: Path) -> None:
    harbor = Path(__file__).parents[2] / "tasks" / "harbor-mini"
    result = CliRunner().invoke(app, ["tasks", "ls", str(harbor)], env={"COLUMNS": "200"})
    assert result.exit_code == 2
    said = " ".join(result.output.split())
    assert f"megaflow tasks convert --from harbor {harbor} --out SET.jsonl" in said, said
    empty = tmp_path / "empty"
    empty.mkdir()
    other = CliRunner().invoke(app, ["tasks", "ls", str(empty)])
    assert other.exit_code == 2
    assert "Harbor" not in other.output  # no hint where there are no Harbor tasks

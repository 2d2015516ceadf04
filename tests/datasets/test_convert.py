"""``megaflow tasks convert``: SWE-bench-format rows as published to a task set."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.datasets import load_instances
from megaflow.datasets.validate import validate_instances
from megaflow.environment.abstract import Runtime
from tests.datasets.conftest import make_calc_repo

runner = CliRunner()


def published(instance: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """The row as the hub publishes it: no megaflow fields, lists as JSON text."""
    row = {k: v for k, v in instance.items() if not k.startswith("megaflow_")}
    row["FAIL_TO_PASS"] = json.dumps(row["FAIL_TO_PASS"])
    row["PASS_TO_PASS"] = json.dumps(row["PASS_TO_PASS"])
    row.update(version="1.0", environment_setup_commit=row["base_commit"], **changes)
    return row


def convert(*args: str) -> Any:
    return runner.invoke(app, ["tasks", "convert", *args], env={"COLUMNS": "1000"})


async def test_jsonl_rows_with_json_text_lists_become_a_runnable_set(
    tmp_path: Path, runtime: Runtime
) -> None:
    repos = tmp_path / "set" / "repos"
    _, instance = make_calc_repo(repos)
    rows = tmp_path / "swe-bench.jsonl"
    second = published(instance, instance_id="calc__calc-2", PASS_TO_PASS="[]")
    rows.write_text(json.dumps(published(instance)) + "\n\n" + json.dumps(second) + "\n")
    out = tmp_path / "set" / "instances.jsonl"
    result = convert(str(rows), "--out", str(out), "--source", "dir", "--repos", str(repos),
                     "--template", "{name}")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "wrote 2 instances" in result.output
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert written[0]["megaflow_source"] == {"type": "dir", "path": "repos/calc"}
    assert written[0]["FAIL_TO_PASS"] == ["test_new.py::test_add"]  # decoded, not text
    assert written[1]["PASS_TO_PASS"] == []
    instances = load_instances(out.parent)
    assert [i.instance_id for i in instances] == ["calc__calc-1", "calc__calc-2"]
    extra = {"version": "1.0", "environment_setup_commit": instance["base_commit"]}
    assert instances[0].model_extra == extra
    # the converted set grades: gold resolves, the empty patch does not
    report = await validate_instances(runtime, instances[:1], concurrency=1)
    assert report.ok, [r.reason() for r in report.misbehaving]


def test_parquet_rows_and_bundles_outside_the_set(tmp_path: Path) -> None:
    repo, instance = make_calc_repo(tmp_path / "clones")
    bundles = tmp_path / "bundles"
    bundles.mkdir()
    subprocess.run(["git", "-C", str(repo), "bundle", "create", "-q",
                    str(bundles / "example__calc.bundle"), "--all"], check=True)  # fmt: skip
    row = published(instance, created_at=datetime(2024, 5, 1, 12, 0))
    pq.write_table(pa.Table.from_pylist([row]), tmp_path / "test-00000-of-00001.parquet")
    out = tmp_path / "out" / "instances.jsonl"
    result = convert(str(tmp_path / "test-00000-of-00001.parquet"), "-o", str(out),
                     "--source", "git_bundle", "--repos", str(bundles),
                     "--test-cmd", "python3 -m pytest -x")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "--source-root" in result.output  # the bundles lie outside the set's folder
    [inst] = load_instances(out, source_roots=[bundles])
    assert inst.megaflow_source.type == "git_bundle"
    assert inst.megaflow_source.path == str(bundles / "example__calc.bundle")
    assert inst.megaflow_test_cmd == "python3 -m pytest -x"
    assert inst.model_extra is not None
    assert inst.model_extra["created_at"].startswith("2024-05-01")


def test_bad_rows_exit_2_naming_row_and_field(tmp_path: Path) -> None:
    repos = tmp_path / "repos"
    _, instance = make_calc_repo(repos)
    good = published(instance)
    out = tmp_path / "instances.jsonl"
    cases = {
        "bad-list": (published(instance, FAIL_TO_PASS='["a", '), "field 'FAIL_TO_PASS'"),
        "empty-f2p": (published(instance, FAIL_TO_PASS="[]"), "field 'FAIL_TO_PASS'"),
        "no-commit": ({k: v for k, v in good.items() if k != "base_commit"}, "field 'base_commit'"),
        "bad-repo": (published(instance, repo="calc"), "field 'repo'"),
    }
    for name, (row, field) in cases.items():
        rows = tmp_path / f"{name}.jsonl"
        rows.write_text(json.dumps(good) + "\n" + json.dumps(row) + "\n")
        result = convert(str(rows), "-o", str(out), "--source", "dir", "--repos", str(repos),
                         "--template", "{name}")  # fmt: skip
        assert result.exit_code == 2, (name, result.output)
        assert f"{name}.jsonl:2: instance 'calc__calc-1': {field}" in result.output
        assert not out.exists()  # nothing half-written
    missing = tmp_path / "missing.jsonl"
    missing.write_text(json.dumps(good) + "\n")
    result = convert(str(missing), "-o", str(out), "--source", "dir", "--repos", str(repos))
    assert result.exit_code == 2
    assert "example__calc does not exist" in result.output
    ok = convert(str(missing), "-o", str(out), "--source", "dir", "--repos", str(repos),
                 "--allow-missing")  # fmt: skip
    assert ok.exit_code == 0, ok.output
    before = out.read_text()
    again = convert(str(missing), "-o", str(out), "--source", "dir", "--repos", str(repos),
                    "--allow-missing")  # fmt: skip
    assert again.exit_code == 2
    assert "--force" in again.output
    assert out.read_text() == before
    assert convert(str(missing), "-o", str(out), "--source", "image", "--repos", ".").exit_code == 2
    bad_template = convert(str(missing), "-o", str(out), "--source", "dir", "--repos",
                           str(repos), "--template", "{org}", "--force")  # fmt: skip
    assert bad_template.exit_code == 2
    assert "{org}" not in out.read_text()

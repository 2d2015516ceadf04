"""The bad-input corpus: every kind of malformed input gets a clear message and
exit code 2 from the CLI, and nothing is started or written."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from megaflow.cli.main import app

runner = CliRunner()
OK_TASKS = "tasks: {type: inline, tasks: [{id: a}]}\n"

# name -> (file bytes, fragments the message must contain)
CORPUS: dict[str, tuple[bytes, list[str]]] = {
    "malformed yaml": (b"tasks: [unclosed\n", ["malformed YAML", "line"]),
    "malformed json": (b'{"tasks": {"type": "inline",, }}', ["malformed YAML"]),
    "tab indentation": (b"tasks:\n\t type: inline\n", ["malformed YAML"]),
    "not a mapping": (b"- just\n- a list\n", ["(top level)", "mapping"]),
    "empty file": (b"", ["(top level)"]),
    "unknown top field": (OK_TASKS.encode() + b"colour: red\n", ["colour", "unknown field"]),
    "unknown nested field": (
        OK_TASKS.encode() + b"scheduler: {policy: {type: fifo, agin: 2}}\n",
        ["scheduler.policy.agin", "unknown field"],
    ),
    "wrong type": (OK_TASKS.encode() + b"samples: many\n", ["samples", "integer"]),
    "bad enum": (OK_TASKS.encode() + b"task_type: training\n", ["task_type", "'train'"]),
    "bad tag": (OK_TASKS.encode() + b"model: {type: gpt5}\n", ["model", "replay"]),
    "missing field": (b"name: x\n", ["tasks", "required field is missing"]),
    "negative limit": (OK_TASKS.encode() + b"max_attempts: -1\n", ["max_attempts"]),
    "negative cpus": (OK_TASKS.encode() + b"environment: {cpus: -2}\n", ["environment.cpus"]),
    "zero concurrency": (
        OK_TASKS.encode() + b"scheduler: {max_concurrency: 0}\n",
        ["scheduler.max_concurrency"],
    ),
    "duplicate task ids": (
        b"tasks: {type: inline, tasks: [{id: a}, {id: b}, {id: a}]}\n",
        ["tasks.tasks", "duplicate task id 'a'"],
    ),
    "huge string": (OK_TASKS.encode() + b"name: " + b"x" * 100_000 + b"\n", ["name"]),
    "oversized file": (b"# " + b"x" * (9 * 1024 * 1024) + b"\n", ["the limit is"]),
    "invalid unicode": (OK_TASKS.encode() + b"name: \xff\xfe\xfa\n", ["not valid UTF-8"]),
    "path traversal in name": (OK_TASKS.encode() + b"name: ../../etc\n", ["name", ".."]),
    "control chars in name": (OK_TASKS.encode() + b'name: "a\\x00b"\n', ["name"]),
    "yaml bomb": (
        b"a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        b"c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n" + OK_TASKS.encode(),
        ["unknown field"],
    ),
}


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_config_validate_rejects(tmp_path: Path, name: str) -> None:
    data, fragments = CORPUS[name]
    path = tmp_path / "bad.yaml"
    path.write_bytes(data)
    res = runner.invoke(app, ["config", "validate", str(path)])
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())  # undo the console's line wrapping
    for fragment in fragments:
        assert fragment in text, (fragment, text[-2000:])


@pytest.mark.parametrize("name", ["unknown top field", "duplicate task ids", "invalid unicode"])
def test_run_rejects_before_any_work(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, fragments = CORPUS[name]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.yaml").write_bytes(data)
    res = runner.invoke(app, ["run", "bad.yaml"])
    assert res.exit_code == 2, res.output
    assert fragments[0] in " ".join(res.output.split())
    assert not (tmp_path / ".megaflow").exists(), "nothing may be written for a bad config"


def test_bad_task_set_is_rejected_with_instance_and_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "instances.jsonl").write_text(
        '{"instance_id": "ok-1", "repo": "r", "base_commit": "x", "problem_statement": "p",'
        ' "patch": "", "test_patch": "", "FAIL_TO_PASS": 5, "PASS_TO_PASS": []}\n'
    )
    cfg = tmp_path / "run.yaml"
    cfg.write_text(f"tasks: {{type: swebench, path: {tmp_path}}}\n")
    res = runner.invoke(app, ["run", str(cfg)])
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())
    assert "ok-1" in text
    assert "FAIL_TO_PASS" in text
    assert not Path(".megaflow").exists() or not any(Path(".megaflow").iterdir())


def test_cli_arguments_are_checked() -> None:
    assert runner.invoke(app, ["run"]).exit_code == 2
    assert runner.invoke(app, ["export", "r", "--format", "xml"]).exit_code == 2
    assert runner.invoke(app, ["top", "--interval", "-1"]).exit_code == 2

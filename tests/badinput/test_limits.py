"""Bad input past the limits: deep nesting, invalid UTF-8 and empty task sets
end in exit code 2 with the file and line named, never a traceback, and
nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from megaflow.cli.main import app
from tests.datasets.conftest import make_calc_repo

runner = CliRunner()
OK_TASKS = b"tasks: {type: inline, tasks: [{id: a}]}\n"


def _bomb() -> bytes:
    """Nine anchors, each list holding nine of the one before: 9**9 values expanded."""
    lines = [b"    l0: &l0 [x, x, x, x, x, x, x, x, x]\n"]
    for i in range(1, 9):
        refs = b", ".join([b"*l%d" % (i - 1)] * 9)
        lines.append(b"    l%d: &l%d [%s]\n" % (i, i, refs))
    return b"tasks:\n  type: inline\n  tasks:\n  - id: a\n    payload:\n" + b"".join(lines)


# name -> (config bytes, fragments the message must contain)
CONFIGS: dict[str, tuple[bytes, list[str]]] = {
    "deep flow yaml": (OK_TASKS + b"name: " + b"[" * 100_000 + b"\n", ["nested deeper", "line 2"]),
    "deep block yaml": (
        OK_TASKS + b"".join(b"  " * i + b"a:\n" for i in range(2000)),
        ["nested deeper", "line 66"],
    ),
    "deep flow mapping": (b"{a: " * 50_000 + b"1" + b"}" * 50_000 + b"\n", ["nested deeper"]),
    "deep payload": (
        b"tasks: {type: inline, tasks: [{id: a, payload: "
        + b"{x: " * 300
        + b"1"
        + b"}" * 300
        + b"}]}\n",
        ["nested deeper", "line 1"],
    ),
    "self-referencing alias": (
        b"tasks: {type: inline, tasks: [{id: a, payload: &p {x: [*p]}}]}\n",
        ["nested deeper"],
    ),
    "alias bomb in a payload": (_bomb(), ["once its aliases are expanded", "the limit is"]),
    "invalid utf-8 line": (OK_TASKS + b"name: ok\n# \xff\xfe\n", ["not valid UTF-8", "line 3"]),
    "empty inline task list": (b"tasks: {type: inline, tasks: []}\n", ["tasks.tasks"]),
}


def _text(output: str) -> str:
    return "".join(output.split())  # undo the console's line wrapping, even inside paths


def _assert_names(output: str, fragments: list[str]) -> None:
    assert "Traceback" not in output
    for fragment in fragments:
        assert _text(fragment) in _text(output), (fragment, output[-3000:])


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_config_validate_refuses(tmp_path: Path, name: str) -> None:
    data, fragments = CONFIGS[name]
    (tmp_path / "bad.yaml").write_bytes(data)
    res = runner.invoke(app, ["config", "validate", str(tmp_path / "bad.yaml")])
    assert res.exit_code == 2, res.output[-3000:]
    _assert_names(res.output, ["bad.yaml", *fragments])


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_run_refuses_before_any_work(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, fragments = CONFIGS[name]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.yaml").write_bytes(data)
    res = runner.invoke(app, ["run", "bad.yaml"])
    assert res.exit_code == 2, res.output[-3000:]
    _assert_names(res.output, fragments)
    assert not (tmp_path / ".megaflow").exists(), "nothing may be written for a bad config"


def _instance(tmp_path: Path) -> bytes:
    _, inst = make_calc_repo(tmp_path)
    return json.dumps(inst).encode()


# name -> (instances file name, its bytes given one good instance, fragments)
TASK_SETS: dict[str, tuple[str, object, list[str]]] = {
    "invalid utf-8": (
        "instances.jsonl",
        lambda good: good + b"\n" + good[:40] + b"\xc3\x28" + good[42:] + b"\n",
        ["instances.jsonl:2", "not valid UTF-8"],
    ),
    "deep json": (
        "instances.json",
        lambda good: b"[\n" + good + b",\n" + b"[" * 100_000 + b"]" * 100_000 + b"\n]\n",
        ["instances.json:3", "nested deeper than 100 levels"],
    ),
    "deep jsonl line": (
        "instances.jsonl",
        lambda good: good + b"\n" + b'{"a": ' * 5000 + b"1" + b"}" * 5000 + b"\n",
        ["instances.jsonl:2", "nested deeper than 100 levels"],
    ),
    "empty jsonl": ("instances.jsonl", lambda good: b"\n  \n", ["holds no instances"]),
    "empty json list": ("instances.json", lambda good: b"[]\n", ["holds no instances"]),
}


def _task_set(tmp_path: Path, name: str) -> Path:
    fname, make, _ = TASK_SETS[name]
    good = _instance(tmp_path)
    (tmp_path / fname).write_bytes(make(good))  # type: ignore[operator]
    return tmp_path


@pytest.mark.parametrize("name", sorted(TASK_SETS))
def test_tasks_validate_refuses_the_task_set(tmp_path: Path, name: str) -> None:
    tset = _task_set(tmp_path, name)
    boxes = tmp_path / "sandboxes"
    res = runner.invoke(app, ["tasks", "validate", str(tset), "--sandbox-root", str(boxes)])
    assert res.exit_code == 2, res.output[-3000:]
    _assert_names(res.output, TASK_SETS[name][2])
    assert not boxes.exists()
    assert runner.invoke(app, ["tasks", "ls", str(tset)]).exit_code == 2


@pytest.mark.parametrize("name", sorted(TASK_SETS))
def test_run_refuses_the_task_set_before_any_work(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    tset = _task_set(tmp_path, name)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.yaml").write_text(f"tasks: {{type: swebench, path: {tset}}}\n")
    res = runner.invoke(app, ["run", "run.yaml"])
    assert res.exit_code == 2, res.output[-3000:]
    _assert_names(res.output, TASK_SETS[name][2])
    assert not (tmp_path / ".megaflow").exists(), "no run row, no artifacts"

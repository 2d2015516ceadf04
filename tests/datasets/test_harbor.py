"""Reading Harbor task folders: fields from task.toml, the image's content hash,
and bad folders refused with the file and field named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from megaflow.core.errors import InvalidInput
from megaflow.datasets.harbor import image_tag, load_rows, read_task, read_tasks, write_rows

MINI = Path(__file__).resolve().parents[2] / "tasks" / "harbor-mini"


def make(root: Path, toml: str = "", dockerfile: str = "FROM base\nWORKDIR /srv/app\n") -> Path:
    task = root / "t1"
    for sub in ("tests", "solution", "environment"):
        (task / sub).mkdir(parents=True, exist_ok=True)
    (task / "task.toml").write_text(toml)
    (task / "instruction.md").write_text("Do the thing.\n")
    (task / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    (task / "solution" / "solve.sh").write_text("true\n")
    (task / "environment" / "Dockerfile").write_text(dockerfile)
    return task


def test_task_toml_fields_are_read(tmp_path: Path) -> None:
    toml = (
        "[verifier]\ntimeout_sec = 30.0\n[agent]\ntimeout_sec = 90\n"
        '[environment]\ncpus = 2\nmemory = "1G"\nstorage_mb = 512\nallow_internet = true\n'
    )
    task = read_task(make(tmp_path, toml))
    assert (task.verifier_timeout_s, task.agent_timeout_s) == (30.0, 90.0)
    assert (task.cpus, task.memory_mb, task.storage_mb, task.internet) == (2.0, 1024, 512, True)
    assert task.workdir == "/srv/app"
    assert task.tests == {"test.sh": "echo 1 > /logs/verifier/reward.txt\n"}
    assert task.solution == {"solve.sh": "true\n"}


def test_the_image_tag_follows_the_environment_folder_content(tmp_path: Path) -> None:
    folder = make(tmp_path)
    first = image_tag(read_task(folder))
    assert first.startswith("localhost/megaflow-harbor:")
    assert image_tag(read_task(folder)) == first
    (folder / "environment" / "data.txt").write_text("x")
    assert image_tag(read_task(folder)) != first
    (folder / "tests" / "test.sh").write_text("echo 0\n")  # tests are not in the image
    second = image_tag(read_task(folder))
    (folder / "tests" / "test.sh").write_text("echo 1\n")
    assert image_tag(read_task(folder)) == second


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        (lambda t: (t / "instruction.md").unlink(), "instruction.md: missing"),
        (lambda t: (t / "tests" / "test.sh").unlink(), "test.sh: missing"),
        (lambda t: (t / "tests" / "link").symlink_to("/etc/passwd"), "a symbolic link"),
        (lambda t: (t / "tests" / "blob").write_bytes(b"\xff\xfe"), "not UTF-8 text"),
        (lambda t: (t / "task.toml").write_text("[agent]\ntimeout_sec = 'soon'\n"), "not a number"),
        (lambda t: (t / "task.toml").write_text("environment = 3\n"), "[environment] must be"),
        (lambda t: (t / "environment" / "Dockerfile").write_text("WORKDIR /\n"), "WORKDIR"),
        (lambda t: (t / "environment" / "Dockerfile").unlink(), "no environment.docker_image"),
    ],
)
def test_a_bad_task_is_refused_with_its_file(tmp_path: Path, breakage, message: str) -> None:  # type: ignore[no-untyped-def]
    folder = make(tmp_path)
    breakage(folder)
    with pytest.raises(InvalidInput, match=message.replace("[", r"\[").replace("]", r"\]")):
        read_task(folder)


def test_converted_rows_read_back_and_a_bad_line_is_named(tmp_path: Path) -> None:
    tasks = read_tasks(MINI)
    assert len(tasks) == 8
    out = tmp_path / "set.jsonl"
    write_rows(tasks, out)
    rows = load_rows(out)
    assert [i for i, _ in rows] == [t.name for t in tasks]
    assert rows == load_rows(MINI)
    with pytest.raises(InvalidInput, match="exists"):
        write_rows(tasks, out)
    out.write_text(out.read_text() + json.dumps({"id": "x", "payload": {}}) + "\n")
    with pytest.raises(InvalidInput, match="line 9: not a converted Harbor task"):
        load_rows(out)

"""The state directory is the owner's alone: folders MegaFlow creates are 0700,
the SQLite database (with its -wal and -shm files) and service logs 0600,
whatever the umask."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.storage.local_artifacts import LocalArtifactStore
from megaflow.storage.private import private_dir, private_file
from megaflow.storage.sqlite import SqliteMetadataStore

runner = CliRunner()


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(params=[0o000, 0o022, 0o002])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


async def test_sqlite_files_are_0600_in_a_0700_folder(tmp_path: Path, umask: int) -> None:
    db = tmp_path / "state" / "nested" / "megaflow.db"
    async with SqliteMetadataStore(db) as store:
        await store.list_runs()
        assert _mode(tmp_path / "state") == 0o700
        assert _mode(db.parent) == 0o700
        assert _mode(db) == 0o600
        # WAL mode: the -wal and -shm files exist while the store is open
        for suffix in ("-wal", "-shm"):
            side = Path(f"{db}{suffix}")
            assert side.exists(), side
            assert _mode(side) == 0o600, (side, oct(_mode(side)))


async def test_artifact_folders_are_0700(tmp_path: Path, umask: int) -> None:
    store = LocalArtifactStore(tmp_path / "state" / "artifacts")
    await store.start()
    await store.put("runs/r1/task/patch.diff", b"diff")
    for d in [tmp_path / "state", store.root, store.root / "runs", store.root / "runs" / "r1"]:
        assert _mode(d) == 0o700, d
    files = [p for p in store.root.rglob("*") if p.is_file()]
    assert files
    assert all(_mode(p) & 0o077 == 0 for p in files)


def test_private_file_and_dir_leave_existing_ones_alone(tmp_path: Path, umask: int) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    log = shared / "svc" / "scheduler.log"
    os.close(private_file(log))
    assert _mode(log) == 0o600
    assert _mode(log.parent) == 0o700
    assert _mode(shared) == 0o755, "a folder that existed is not ours to change"
    log.chmod(0o640)
    fd = private_file(log)  # reopening appends, and keeps the mode
    os.write(fd, b"more\n")
    os.close(fd)
    assert _mode(log) == 0o640
    with pytest.raises(NotADirectoryError):
        private_dir(log)


def test_log_files_are_0600(tmp_path: Path, umask: int) -> None:
    """As `megaflow up` opens each service's log (tests/app/test_launcher.py runs it)."""
    state = tmp_path / "cluster"
    private_dir(state)
    with os.fdopen(private_file(state / "scheduler.log"), "ab") as out:
        out.write(b"started\n")
    assert _mode(state) == 0o700
    assert _mode(state / "scheduler.log") == 0o600


def test_megaflow_run_makes_a_private_state_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, umask: int
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.yaml").write_text(
        "tasks: {type: inline, tasks: [{id: a, payload: {x: 1}}]}\n"
        "environment: {runtime: {type: dummy}}\nmax_attempts: 1\n"
    )
    res = runner.invoke(app, ["run", "run.yaml"])
    assert res.exit_code in (0, 1), res.output
    state = tmp_path / ".megaflow"
    assert _mode(state) == 0o700
    assert _mode(state / "megaflow.db") == 0o600
    for d in [p for p in state.rglob("*") if p.is_dir()]:
        assert _mode(d) == 0o700, d
    for f in [p for p in state.rglob("*") if p.is_file()]:
        assert _mode(f) & 0o077 == 0, f


def test_tasks_validate_makes_a_private_state_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.datasets.conftest import make_calc_repo, write_jsonl

    _, inst = make_calc_repo(tmp_path / "set")
    write_jsonl(tmp_path / "set" / "instances.jsonl", [inst])
    monkeypatch.chdir(tmp_path)
    old = os.umask(0)
    try:
        res = runner.invoke(app, ["tasks", "validate", "set"])
    finally:
        os.umask(old)
    assert res.exit_code == 0, res.output
    assert _mode(tmp_path / ".megaflow") == 0o700

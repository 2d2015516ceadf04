"""What a MegaFlow process killed while making or removing a sandbox directory
leaves behind, and that the next process's reaper removes it (and nothing a
live process still needs)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from megaflow.environment.local import records
from megaflow.environment.local.reaper import Reaper
from megaflow.environment.local.records import (
    SandboxRecord,
    make_sandbox_dir,
    process_key,
    remove_sandbox_dir,
)

DEAD = f"999999999.1.{records.pid_namespace()}"  # no such pid: a process that is gone


def record(sid: str, process: str) -> SandboxRecord:
    now = time.time()
    return SandboxRecord(sid, "o", now + 600, now, "host", process)


def reap(root: Path) -> tuple[int, list[str]]:
    count = Reaper(root, None, process_key()).reap(set())
    return count, sorted(p.name for p in root.iterdir())


def test_a_sandbox_directory_appears_with_its_record(tmp_path: Path) -> None:
    make_sandbox_dir(tmp_path / "abc", record("abc", DEAD))
    assert [p.name for p in tmp_path.iterdir()] == ["abc"]
    loaded = SandboxRecord.load(tmp_path / "abc")
    assert loaded is not None
    assert loaded.process == DEAD


def test_directories_cut_short_while_being_made(tmp_path: Path) -> None:
    for sid, maker in (("dead1", DEAD), ("mine", process_key())):
        making = tmp_path / f"{records.NEW}{maker}-{sid}"
        making.mkdir()  # the maker was killed before (or after) it saved the record
        if sid == "mine":
            record(sid, maker).save(making)
    assert reap(tmp_path) == (1, [f"{records.NEW}{process_key()}-mine"])


def test_a_removal_cut_short_is_finished_by_the_reaper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    live = record("live", process_key())  # a live owner: its record alone would keep it
    make_sandbox_dir(tmp_path / "live", live)
    (tmp_path / "live" / "rw" / "ws").mkdir(parents=True)

    def killed(path: Path, ignore_errors: bool = False) -> None:
        (Path(path) / records.RECORD).unlink()  # the crash came after the record went
        raise SystemExit("killed")

    monkeypatch.setattr(shutil, "rmtree", killed)
    with pytest.raises(SystemExit):
        remove_sandbox_dir(tmp_path / "live")
    monkeypatch.undo()
    assert [p.name for p in tmp_path.iterdir()] == [f"{records.GONE}live"]
    assert reap(tmp_path) == (0, [])


def test_a_young_directory_without_a_record_is_left_alone(tmp_path: Path) -> None:
    (tmp_path / "foreign").mkdir()  # not made by MegaFlow's make_sandbox_dir
    assert reap(tmp_path) == (0, ["foreign"])

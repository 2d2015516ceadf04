"""Local-file store specifics; the shared behaviour is in test_artifacts_contract.py."""

import asyncio
import errno
import os
from pathlib import Path

import pytest

from megaflow.core.errors import ArtifactKeyError, StorageError
from megaflow.storage.local_artifacts import LocalArtifactStore


async def test_escaping_keys_write_nothing_outside(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path / "root")
    await store.start()
    for key in ("../x", "/x", "a/../../x"):
        with pytest.raises(ArtifactKeyError):
            await store.put(key, b"x")
    assert not any((tmp_path).glob("x"))


async def test_symlink_out_of_root_is_rejected(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path / "root")
    await store.start()
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", tmp_path / "root" / "link")
    with pytest.raises(ArtifactKeyError, match="outside"):
        await store.put("link/evil", b"x")
    assert not (tmp_path / "outside" / "evil").exists()


async def test_overwrite_is_atomic_and_leaves_no_temp_files(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path)
    await store.start()
    for i in range(5):
        await store.put("k", bytes([i]) * 1000)
    assert await store.get("k") == bytes([4]) * 1000
    assert not list(tmp_path.glob(".tmp-*"))


async def test_checksum_sidecar_names_are_reserved(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path)
    await store.start()
    with pytest.raises(StorageError, match="sha256"):
        await store.put("a.sha256", b"x")


async def test_failed_write_keeps_the_old_artifact_and_no_temp_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalArtifactStore(tmp_path)
    await store.start()
    await store.put("run/t/a1/trajectory.json", b"old")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(StorageError, match="No space left") as err:
        await store.put("run/t/a1/trajectory.json", b"new")
    assert isinstance(err.value.__cause__, OSError)  # what the outage loop retries on
    monkeypatch.undo()
    assert await store.get("run/t/a1/trajectory.json") == b"old"
    assert not [p for p in tmp_path.rglob("*") if p.name.startswith(".tmp-")]


async def test_new_folders_are_made_once_each_and_shared(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path / "root")
    await store.start()
    keys = [f"runs/r/tasks/t{i % 3}/attempt-1/{name}" for i in range(9) for name in ("a", "b")]
    await asyncio.gather(*(store.put(k, k.encode()) for k in keys))
    for k in keys:
        assert await store.get(k) == k.encode()
    assert sorted(await store.list("runs/r/tasks/t0/")) == [
        "runs/r/tasks/t0/attempt-1/a",
        "runs/r/tasks/t0/attempt-1/b",
    ]

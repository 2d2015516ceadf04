"""Local-file store specifics; the shared behaviour is in test_artifacts_contract.py."""

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

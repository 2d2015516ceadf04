import os
from pathlib import Path

import pytest

from megaflow.core.errors import ArtifactKeyError, ChecksumMismatch, NotFound
from megaflow.storage.keys import check_key
from megaflow.storage.local_artifacts import LocalArtifactStore

BAD_KEYS = [
    "", "/etc/passwd", "../x", "a/../../x", "a/./b", "a//b", "a/", "..", ".", "a\\..\\b",
    "C:/x", "a\x00b", "a\nb", "x" * 1025,
]  # fmt: skip


@pytest.mark.parametrize("key", BAD_KEYS)
async def test_escaping_keys_are_rejected(tmp_path: Path, key: str) -> None:
    store = LocalArtifactStore(tmp_path / "root")
    await store.start()
    with pytest.raises(ArtifactKeyError):
        await store.put(key, b"x")
    with pytest.raises(ArtifactKeyError):
        await store.get(key)
    assert not any((tmp_path).glob("x"))


async def test_symlink_out_of_root_is_rejected(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path / "root")
    await store.start()
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", tmp_path / "root" / "link")
    with pytest.raises(ArtifactKeyError, match="outside"):
        await store.put("link/evil", b"x")
    assert not (tmp_path / "outside" / "evil").exists()


async def test_round_trip_checksum_list_delete(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path)
    await store.start()
    ref = await store.put("run/a/traj.json", b'{"x": 1}')
    assert ref.size == 8
    assert len(ref.sha256) == 64
    await store.put("run/b/log.txt", b"log")
    assert await store.get("run/a/traj.json") == b'{"x": 1}'
    assert await store.list("run/") == ["run/a/traj.json", "run/b/log.txt"]
    assert await store.list("run/b") == ["run/b/log.txt"]
    assert await store.exists("run/a/traj.json")
    await store.delete("run/a/traj.json")
    assert not await store.exists("run/a/traj.json")
    with pytest.raises(NotFound):
        await store.get("run/a/traj.json")
    assert check_key("ok/key-1.json") == "ok/key-1.json"


async def test_corruption_is_detected(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path)
    await store.start()
    await store.put("a", b"hello")
    (tmp_path / "a").write_bytes(b"hellO")
    with pytest.raises(ChecksumMismatch):
        await store.get("a")


async def test_overwrite_is_atomic_and_leaves_no_temp_files(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path)
    await store.start()
    for i in range(5):
        await store.put("k", bytes([i]) * 1000)
    assert await store.get("k") == bytes([4]) * 1000
    assert not list(tmp_path.glob(".tmp-*"))

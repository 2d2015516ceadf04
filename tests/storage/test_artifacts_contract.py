"""The ArtifactStore contract, run against every implementation."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from megaflow.core.errors import ArtifactKeyError, ChecksumMismatch, NotFound
from megaflow.storage.abstract import ArtifactStore
from megaflow.storage.keys import check_key
from megaflow.storage.local_artifacts import LocalArtifactStore
from megaflow.storage.s3_artifacts import S3ArtifactStore

BAD_KEYS = [
    "", "/etc/passwd", "../x", "a/../../x", "a/./b", "a//b", "a/", "..", ".", "a\\..\\b",
    "C:/x", "a\x00b", "a\nb", "x" * 1025,
]  # fmt: skip

S3_CREDENTIALS = {"access_key_id": "testing", "secret_access_key": "testing"}


@dataclass
class Backend:
    store: ArtifactStore
    corrupt: Callable[[str, bytes], None]
    """Replace an artifact's bytes behind the store's back, keeping its checksum."""


def s3_store(endpoint: str, bucket: str, **kw: object) -> S3ArtifactStore:
    return S3ArtifactStore(
        bucket,
        endpoint_url=endpoint,
        region="us-east-1",
        **S3_CREDENTIALS,
        **kw,  # type: ignore[arg-type]
    )


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.services)])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    if request.param == "local":
        local = LocalArtifactStore(tmp_path / "root")
        await local.start()
        yield Backend(local, lambda key, data: (local.root / key).write_bytes(data))
        await local.stop()
        return
    endpoint = request.getfixturevalue("moto_server")
    s3 = s3_store(endpoint, f"test-{uuid.uuid4().hex[:12]}", prefix="p", create_bucket=True)
    await s3.start()

    def corrupt(key: str, data: bytes) -> None:
        client = s3._client()
        name = s3.prefix + key
        meta = client.head_object(Bucket=s3.bucket, Key=name)["Metadata"]
        client.put_object(Bucket=s3.bucket, Key=name, Body=data, Metadata=meta)

    yield Backend(s3, corrupt)
    await s3.stop()


async def test_escaping_keys_are_rejected(backend: Backend) -> None:
    store = backend.store
    for key in BAD_KEYS:
        with pytest.raises(ArtifactKeyError):
            await store.put(key, b"x")
        with pytest.raises(ArtifactKeyError):
            await store.get(key)
        with pytest.raises(ArtifactKeyError):
            await store.exists(key)
    assert await store.list() == []


async def test_round_trip_checksum_list_delete(backend: Backend) -> None:
    store = backend.store
    ref = await store.put("run/a/traj.json", b'{"x": 1}')
    assert ref.size == 8
    assert len(ref.sha256) == 64
    await store.put("run/b/log.txt", b"log")
    assert await store.get("run/a/traj.json") == b'{"x": 1}'
    assert await store.list("run/") == ["run/a/traj.json", "run/b/log.txt"]
    assert await store.list("run/b") == ["run/b/log.txt"]
    assert await store.exists("run/a/traj.json")
    await store.delete("run/a/traj.json")
    await store.delete("run/a/traj.json")  # deleting twice is fine
    assert not await store.exists("run/a/traj.json")
    with pytest.raises(NotFound):
        await store.get("run/a/traj.json")
    assert check_key("ok/key-1.json") == "ok/key-1.json"


async def test_empty_and_binary_artifacts(backend: Backend) -> None:
    store = backend.store
    await store.put("empty", b"")
    blob = bytes(range(256)) * 64
    await store.put("bin/blob", blob)
    assert await store.get("empty") == b""
    assert await store.get("bin/blob") == blob


async def test_corruption_is_detected(backend: Backend) -> None:
    await backend.store.put("a", b"hello")
    backend.corrupt("a", b"hellO")
    with pytest.raises(ChecksumMismatch):
        await backend.store.get("a")


async def test_overwrite_keeps_the_last_version(backend: Backend) -> None:
    for i in range(5):
        await backend.store.put("k", bytes([i]) * 1000)
    assert await backend.store.get("k") == bytes([4]) * 1000
    assert await backend.store.list() == ["k"]

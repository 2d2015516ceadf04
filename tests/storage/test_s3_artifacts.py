"""S3 specifics against a real moto_server: multipart, prefixes, clear errors."""

from __future__ import annotations

import hashlib
import os
import re
import uuid
from collections.abc import AsyncIterator

import pytest

from megaflow.core.errors import ChecksumMismatch, ConfigError, StorageError, TransportError
from megaflow.storage.s3_artifacts import MIN_PART_SIZE, S3ArtifactStore
from tests.fixtures.servers import free_port
from tests.storage.test_artifacts_contract import s3_store

pytestmark = pytest.mark.services


@pytest.fixture
async def store(moto_server: str) -> AsyncIterator[S3ArtifactStore]:
    s = s3_store(
        moto_server,
        f"s3-{uuid.uuid4().hex[:12]}",
        create_bucket=True,
        multipart_threshold=1024,
        part_size=MIN_PART_SIZE,
    )
    await s.start()
    yield s
    await s.stop()


async def test_large_objects_go_up_in_parts(store: S3ArtifactStore) -> None:
    data = os.urandom(2 * MIN_PART_SIZE + 1000)
    ref = await store.put("big/blob.bin", data)
    assert ref.sha256 == hashlib.sha256(data).hexdigest()
    client = store._client()
    head = client.head_object(Bucket=store.bucket, Key="big/blob.bin")
    assert head["ETag"].strip('"').endswith("-3")  # S3's mark of a 3-part upload
    assert head["Metadata"]["sha256"] == ref.sha256
    assert await store.get("big/blob.bin") == data
    assert client.list_multipart_uploads(Bucket=store.bucket).get("Uploads", []) == []


async def test_small_objects_go_up_in_one_request(store: S3ArtifactStore) -> None:
    await store.put("small", b"x" * 1024)
    head = store._client().head_object(Bucket=store.bucket, Key="small")
    assert "-" not in head["ETag"]


async def test_prefixes_keep_stores_apart(store: S3ArtifactStore, moto_server: str) -> None:
    other = s3_store(moto_server, store.bucket, prefix="team-b/")
    await other.start()
    try:
        await store.put("x/1", b"a")
        await other.put("x/2", b"b")
        assert await store.list() == ["team-b/x/2", "x/1"]  # the root sees everything
        assert await other.list() == ["x/2"]
        assert await other.list("x/") == ["x/2"]
        assert not await other.exists("x/1")
        assert store._client().get_object(Bucket=store.bucket, Key="team-b/x/2")["Body"].read()
    finally:
        await other.stop()


async def test_objects_without_checksum_are_refused(store: S3ArtifactStore) -> None:
    store._client().put_object(Bucket=store.bucket, Key="foreign", Body=b"data")
    with pytest.raises(ChecksumMismatch, match="no sha256"):
        await store.get("foreign")


async def test_missing_bucket_is_a_clear_error(moto_server: str) -> None:
    s = s3_store(moto_server, "no-such-bucket-here")
    with pytest.raises(StorageError, match=r"does not exist.*create_bucket"):
        await s.start()


async def test_unreachable_endpoint_is_a_transport_error() -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    s = s3_store(endpoint, "b", max_attempts=1, connect_timeout_s=1)
    with pytest.raises(TransportError, match=re.escape(f"cannot reach the S3 endpoint {endpoint}")):
        await s.start()


def test_parts_below_the_s3_minimum_are_refused() -> None:
    with pytest.raises(ConfigError, match="part_size"):
        S3ArtifactStore("b", part_size=1024)

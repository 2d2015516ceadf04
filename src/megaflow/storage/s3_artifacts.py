"""Artifact store on S3-compatible object storage (AWS S3, MinIO, Ceph, ...).

boto3 is synchronous, so every call runs in a worker thread. Keys follow the
same rules as the local store (:func:`megaflow.storage.keys.check_key`) and
live under an optional ``prefix`` in the bucket. The SHA-256 of each object
is stored in its metadata (``x-amz-meta-sha256``) and verified on every read.
Objects larger than ``multipart_threshold`` are uploaded in parts of
``part_size`` bytes; an upload that fails half-way is aborted, so no orphan
parts are left to pay for. S3 only shows an object once its upload is
complete, so a reader never sees a half-written artifact.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from typing import Any

from megaflow.core.errors import (
    ChecksumMismatch,
    ConfigError,
    MegaFlowError,
    NotFound,
    StorageError,
    TransportError,
)
from megaflow.storage.abstract import ArtifactRef, ArtifactStore
from megaflow.storage.keys import check_key

MIN_PART_SIZE = 5 * 1024 * 1024  # S3's floor for every part but the last
_MISSING = ("404", "NoSuchKey", "NotFound")
_BUSY = ("SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout", "503", "500")


class S3ArtifactStore(ArtifactStore):
    def __init__(
        self,
        bucket: str,
        *,
        prefix: str = "",
        endpoint_url: str | None = None,
        region: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        multipart_threshold: int = 64 * 1024 * 1024,
        part_size: int = 16 * 1024 * 1024,
        create_bucket: bool = False,
        connect_timeout_s: float = 5.0,
        max_attempts: int = 3,
    ) -> None:
        if part_size < MIN_PART_SIZE:
            raise ConfigError(f"part_size is {part_size} bytes; S3 needs at least {MIN_PART_SIZE}")
        if prefix:
            check_key(prefix.rstrip("/"))
            prefix = prefix.rstrip("/") + "/"
        self.bucket = bucket
        self.prefix = prefix
        self.endpoint_url = endpoint_url
        self.region = region
        self.multipart_threshold = max(1, multipart_threshold)
        self.part_size = part_size
        self.create_bucket = create_bucket
        self._credentials = (access_key_id, secret_access_key)
        self._timeouts = (connect_timeout_s, max_attempts)
        self._s3: Any = None

    @property
    def where(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" + (
            f" at {self.endpoint_url}" if self.endpoint_url else ""
        )

    # -- lifecycle -----------------------------------------------------------

    def location(self, key: str) -> str:
        return f"s3://{self.bucket}/{self.prefix}{key}"

    def _connect(self) -> Any:
        try:
            import boto3
            from botocore.config import Config
        except ImportError as exc:
            raise ConfigError(
                "the S3 artifact store needs the 's3' extra: pip install 'megaflow[s3]'"
            ) from exc
        connect_timeout, attempts = self._timeouts
        key_id, secret = self._credentials
        return boto3.session.Session().client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name=self.region,
            aws_access_key_id=key_id,
            aws_secret_access_key=secret,
            config=Config(
                connect_timeout=connect_timeout,
                retries={"max_attempts": attempts, "mode": "standard"},
            ),
        )

    def _start(self) -> None:
        self._s3 = self._connect()
        try:
            self._call("check the bucket", self._s3.head_bucket, Bucket=self.bucket)
        except NotFound:
            if not self.create_bucket:
                self._s3 = None
                raise StorageError(
                    f"bucket {self.bucket!r} does not exist ({self.where}); create it, "
                    "or set create_bucket: true in the artifacts config"
                ) from None
            self._call("create the bucket", self._s3.create_bucket, Bucket=self.bucket)
        except BaseException:
            self._s3 = None
            raise

    async def start(self) -> None:
        if self._s3 is None:
            await asyncio.to_thread(self._start)

    async def stop(self) -> None:
        s3, self._s3 = self._s3, None
        if s3 is not None:
            await asyncio.to_thread(s3.close)

    # -- helpers -------------------------------------------------------------

    def _client(self) -> Any:
        if self._s3 is None:
            raise RuntimeError("S3ArtifactStore is not started; call start() or use 'async with'")
        return self._s3

    def _call(self, what: str, fn: Any, **kwargs: Any) -> Any:
        """Run one boto3 call, turning its errors into MegaFlow's."""
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            HTTPClientError,
        )
        from botocore.exceptions import ConnectionError as BotoConnectionError

        try:
            return fn(**kwargs)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in _MISSING:
                raise NotFound(f"cannot {what}: not found in {self.where}") from None
            if code == "NoSuchBucket":
                if self.create_bucket and fn != self._s3.create_bucket:
                    # the server came back without its buckets (a restarted MinIO or
                    # moto): the config says to create it, so do, and say the call
                    # may be tried again
                    self._call("create the bucket", self._s3.create_bucket, Bucket=self.bucket)
                    raise TransportError(
                        f"bucket {self.bucket!r} was missing in {self.where} and was "
                        f"created again; {what} is to be tried again"
                    ) from exc
                raise StorageError(f"bucket {self.bucket!r} does not exist ({self.where})") from exc
            if code in _BUSY:
                raise TransportError(f"cannot {what} in {self.where} now: {exc}") from exc
            raise StorageError(f"cannot {what} in {self.where}: {exc}") from exc
        except (BotoConnectionError, HTTPClientError) as exc:
            raise TransportError(
                f"cannot reach the S3 endpoint {self.endpoint_url or '(default)'} to {what}: "
                f"{exc}; check that it runs and that endpoint_url is right"
            ) from exc
        except BotoCoreError as exc:
            raise StorageError(f"cannot {what} in {self.where}: {exc}") from exc

    def _key(self, key: str) -> str:
        return self.prefix + check_key(key)

    # -- operations ----------------------------------------------------------

    def _put(self, key: str, data: bytes) -> ArtifactRef:
        s3, name = self._client(), self._key(key)
        digest = hashlib.sha256(data).hexdigest()
        meta = {"sha256": digest}
        what = f"write artifact {key!r}"
        if len(data) <= self.multipart_threshold:
            self._call(what, s3.put_object, Bucket=self.bucket, Key=name, Body=data, Metadata=meta)
        else:
            self._put_multipart(what, name, data, meta)
        return ArtifactRef(key=key, size=len(data), sha256=digest)

    def _put_multipart(self, what: str, name: str, data: bytes, meta: dict[str, str]) -> None:
        s3, bucket = self._client(), self.bucket
        upload = self._call(
            what, s3.create_multipart_upload, Bucket=bucket, Key=name, Metadata=meta
        )
        upload_id = upload["UploadId"]
        try:
            parts = []
            view = memoryview(data)
            for number, offset in enumerate(range(0, len(data), self.part_size), start=1):
                body = view[offset : offset + self.part_size].tobytes()
                part = self._call(
                    what, s3.upload_part, Bucket=bucket, Key=name,
                    UploadId=upload_id, PartNumber=number, Body=body,
                )  # fmt: skip
                parts.append({"PartNumber": number, "ETag": part["ETag"]})
            self._call(
                what, s3.complete_multipart_upload, Bucket=bucket, Key=name,
                UploadId=upload_id, MultipartUpload={"Parts": parts},
            )  # fmt: skip
        except BaseException:
            with contextlib.suppress(MegaFlowError):  # keep the original error
                self._call(
                    f"abort the upload of {name!r}", s3.abort_multipart_upload,
                    Bucket=bucket, Key=name, UploadId=upload_id,
                )  # fmt: skip
            raise

    def _get(self, key: str) -> bytes:
        s3 = self._client()
        what = f"read artifact {key!r}"
        obj = self._call(what, s3.get_object, Bucket=self.bucket, Key=self._key(key))
        with obj["Body"] as body:
            data: bytes = body.read()
        expected = obj.get("Metadata", {}).get("sha256")
        if expected is None:
            raise ChecksumMismatch(
                f"artifact {key!r} in {self.where} has no sha256 metadata; "
                "it was not written by MegaFlow"
            )
        if hashlib.sha256(data).hexdigest() != expected:
            raise ChecksumMismatch(f"artifact {key!r} does not match its checksum; it is corrupt")
        return data

    def _exists(self, key: str) -> bool:
        s3 = self._client()
        try:
            self._call(f"find {key!r}", s3.head_object, Bucket=self.bucket, Key=self._key(key))
        except NotFound:
            return False
        return True

    def _list(self, prefix: str) -> list[str]:
        paginator = self._client().get_paginator("list_objects_v2")
        pages = paginator.paginate(Bucket=self.bucket, Prefix=self.prefix + prefix)
        keys: list[str] = []
        for page in self._call(f"list {prefix!r}", lambda: list(pages)):
            keys += [obj["Key"][len(self.prefix) :] for obj in page.get("Contents", [])]
        return sorted(keys)

    async def put(self, key: str, data: bytes) -> ArtifactRef:
        return await asyncio.to_thread(self._put, key, data)

    async def get(self, key: str) -> bytes:
        try:
            return await asyncio.to_thread(self._get, key)
        except NotFound:
            raise NotFound(f"artifact {key!r} not found in {self.where}") from None

    async def exists(self, key: str) -> bool:
        return await asyncio.to_thread(self._exists, key)

    async def delete(self, key: str) -> None:
        s3, name = self._client(), self._key(key)
        await asyncio.to_thread(
            self._call, f"delete {key!r}", s3.delete_object, Bucket=self.bucket, Key=name
        )

    async def list(self, prefix: str = "") -> list[str]:
        return await asyncio.to_thread(self._list, prefix)

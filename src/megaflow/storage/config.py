"""Store configs, one per backend, tagged by ``type``. The unions are the registry.

Each config builds its own store with ``build()``, importing the backend's
module only then; a new backend is one config class and one union member.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from megaflow.storage.abstract import ArtifactStore, EventBus, MetadataStore, TaskQueue


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid")


_SECRET = re.compile(r"(?<=://)([^:/@\s]*):[^@\s]*@|(?<![\w])(password\s*=\s*)(?:'[^']*'|\S+)")


def hide_password(address: str) -> str:
    """A connection URI or libpq string with its password shown as ``***``."""
    return _SECRET.sub(lambda m: f"{m[1]}:***@" if m[1] is not None else f"{m[2]}***", address)


class SqliteMetadataConfig(_Cfg):
    type: Literal["sqlite"] = "sqlite"
    path: str = Field(".megaflow/megaflow.db", description="Database file; ':memory:' for none.")

    def build(self) -> MetadataStore:
        from megaflow.storage.sqlite import SqliteMetadataStore

        return SqliteMetadataStore(self.path)

    def where(self) -> str:
        """Where the metadata lives, as a phrase for messages: ``at PATH`` or ``in ...``."""
        return "in this process's memory" if self.path == ":memory:" else f"at {self.path}"

    def kept(self) -> bool:
        """Whether the metadata outlives the process that wrote it."""
        return self.path != ":memory:"


class PostgresMetadataConfig(_Cfg):
    type: Literal["postgres"] = "postgres"
    dsn: str = Field(
        "postgresql://localhost:5432/megaflow",
        description="libpq connection string or URI; PG* variables and ~/.pgpass fill the rest.",
    )
    db_schema: str = Field(
        "megaflow", min_length=1, max_length=63, description="PostgreSQL schema holding the tables."
    )
    min_connections: int = Field(1, ge=1, le=1000, description="Connections kept open.")
    max_connections: int = Field(10, ge=1, le=1000, description="Most connections at once.")

    def build(self) -> MetadataStore:
        from megaflow.storage.postgres import PostgresMetadataStore

        return PostgresMetadataStore(
            self.dsn,
            schema=self.db_schema,
            min_connections=self.min_connections,
            max_connections=self.max_connections,
        )

    def where(self) -> str:
        """Where the metadata lives, as a phrase for messages (no password)."""
        return f"at {hide_password(self.dsn)}, schema {self.db_schema}"

    def kept(self) -> bool:
        """Whether the metadata outlives the process that wrote it."""
        return True


class MongoMetadataConfig(_Cfg):
    type: Literal["mongo"] = "mongo"
    uri: str = Field("mongodb://localhost:27017", description="MongoDB connection URI.")
    database: str = Field("megaflow", min_length=1, max_length=63, description="Database name.")
    transactions: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Multi-document transactions: 'auto' uses them on replica sets and "
        "sharded clusters only; 'off' always uses the validate-then-apply fallback.",
    )

    def build(self) -> MetadataStore:
        from megaflow.storage.mongo import MongoMetadataStore

        return MongoMetadataStore(self.uri, database=self.database, transactions=self.transactions)

    def where(self) -> str:
        """Where the metadata lives, as a phrase for messages (no password)."""
        return f"at {hide_password(self.uri)}, database {self.database}"

    def kept(self) -> bool:
        """Whether the metadata outlives the process that wrote it."""
        return True


class MemoryMetadataConfig(_Cfg):
    """Dicts in this process: nothing survives it (tests, benchmarks, dry runs)."""

    type: Literal["memory"] = "memory"

    def build(self) -> MetadataStore:
        from megaflow.storage.memory_metadata import MemoryMetadataStore

        return MemoryMetadataStore()

    def where(self) -> str:
        """Where the metadata lives, as a phrase for messages."""
        return "in this process's memory"

    def kept(self) -> bool:
        """Whether the metadata outlives the process that wrote it."""
        return False


class MemoryQueueConfig(_Cfg):
    type: Literal["memory"] = "memory"

    def build(self) -> TaskQueue:
        from megaflow.storage.memory_queue import MemoryTaskQueue

        return MemoryTaskQueue()


class MemoryEventsConfig(_Cfg):
    type: Literal["memory"] = "memory"
    buffer: int = Field(1024, ge=1, le=1_000_000, description="Events buffered per subscriber.")

    def build(self) -> EventBus:
        from megaflow.storage.memory_bus import MemoryEventBus

        return MemoryEventBus()


class _RedisCfg(_Cfg):
    url: str = Field(
        "redis://127.0.0.1:6379/0",
        description="redis:// or rediss:// URL; for a cluster, any one node.",
    )
    cluster: bool = Field(False, description="Talk the Redis Cluster protocol.")
    namespace: str = Field(
        "default",
        pattern=r"^[A-Za-z0-9_.:-]{1,128}$",
        description="Key namespace; every key is hash-tagged {megaflow:<namespace>}.",
    )


class RedisQueueConfig(_RedisCfg):
    type: Literal["redis"] = "redis"
    consumer: str | None = Field(
        None, description="Consumer name in the stream group; default host-pid-random."
    )
    claim_after_s: float = Field(
        60.0,
        ge=0,
        description="A popped entry not acknowledged for this long is taken over and "
        "delivered again (its consumer is presumed crashed).",
    )

    def build(self) -> TaskQueue:
        from megaflow.storage.redis_queue import RedisTaskQueue

        return RedisTaskQueue(
            self.url,
            cluster=self.cluster,
            namespace=self.namespace,
            consumer=self.consumer,
            claim_after_s=self.claim_after_s,
        )


class RedisEventsConfig(_RedisCfg):
    type: Literal["redis"] = "redis"
    max_len: int = Field(
        100_000, ge=100, description="Events kept in the stream (approximate trim)."
    )
    stale_after_s: float = Field(
        3600.0,
        gt=0,
        description="On start, delete subscriber groups idle this long (their process died).",
    )

    def build(self) -> EventBus:
        from megaflow.storage.redis_bus import RedisEventBus

        return RedisEventBus(
            self.url,
            cluster=self.cluster,
            namespace=self.namespace,
            max_len=self.max_len,
            stale_after_s=self.stale_after_s,
        )


class LocalArtifactsConfig(_Cfg):
    type: Literal["local"] = "local"
    root: str = Field(".megaflow/artifacts", description="Directory holding the artifacts.")

    def build(self) -> ArtifactStore:
        from megaflow.storage.local_artifacts import LocalArtifactStore

        return LocalArtifactStore(self.root)

    def where(self, key: str = "") -> str:
        """Where the artifacts (under ``key``) live, for messages."""
        return f"{self.root.rstrip('/')}/{key}"


class S3ArtifactsConfig(_Cfg):
    type: Literal["s3"] = "s3"
    bucket: str = Field(..., min_length=3, max_length=63, description="Bucket name.")
    prefix: str = Field("", description="Key prefix inside the bucket, e.g. 'runs/'.")
    endpoint_url: str | None = Field(
        None, description="S3-compatible endpoint (MinIO, Ceph); None for AWS."
    )
    region: str | None = Field(None, description="Region; None uses the AWS default chain.")
    access_key_id: str | None = Field(
        None, description="Access key; None uses the AWS default credential chain."
    )
    secret_access_key: str | None = Field(None, description="Secret key, with access_key_id.")
    multipart_threshold: int = Field(
        64 * 1024 * 1024, ge=1, description="Objects larger than this go up in parts."
    )
    part_size: int = Field(
        16 * 1024 * 1024, ge=5 * 1024 * 1024, description="Bytes per part (S3 needs >= 5 MiB)."
    )
    create_bucket: bool = Field(False, description="Create the bucket if it does not exist.")

    def build(self) -> ArtifactStore:
        from megaflow.storage.s3_artifacts import S3ArtifactStore

        return S3ArtifactStore(
            self.bucket,
            prefix=self.prefix,
            endpoint_url=self.endpoint_url,
            region=self.region,
            access_key_id=self.access_key_id,
            secret_access_key=self.secret_access_key,
            multipart_threshold=self.multipart_threshold,
            part_size=self.part_size,
            create_bucket=self.create_bucket,
        )

    def where(self, key: str = "") -> str:
        """Where the artifacts (under ``key``) live, for messages."""
        at = f" at {self.endpoint_url}" if self.endpoint_url else ""
        return f"s3://{self.bucket}/{self.prefix}{key}{at}"


MetadataConfig = Annotated[
    SqliteMetadataConfig | PostgresMetadataConfig | MongoMetadataConfig | MemoryMetadataConfig,
    Field(discriminator="type"),
]
QueueConfig = Annotated[MemoryQueueConfig | RedisQueueConfig, Field(discriminator="type")]
EventsConfig = Annotated[MemoryEventsConfig | RedisEventsConfig, Field(discriminator="type")]
ArtifactsConfig = Annotated[LocalArtifactsConfig | S3ArtifactsConfig, Field(discriminator="type")]


class OutageConfig(_Cfg):
    """How long a store may be away before the run stops (``megaflow.storage.retrying``)."""

    deadline_s: float = Field(
        300.0,
        ge=0,
        description="A store call retries transient faults (connection refused or lost, "
        "pool exhausted, timeouts, a full disk) for this long after the store's first "
        "failure; then the run stops with StoreUnavailable and --resume finishes it. "
        "0 retries nothing.",
    )
    backoff_base_s: float = Field(0.2, gt=0, description="Wait before the first retry.")
    backoff_max_s: float = Field(5.0, gt=0, description="Longest wait between two retries.")
    spool_dir: str | None = Field(
        None,
        description="Where a finished task's metadata writes are kept when the metadata "
        "store is given up; the next start of that store (--resume) writes them. Default: "
        "$XDG_STATE_HOME/megaflow/spool (~/.local/state/megaflow/spool), the same folder "
        "whichever directory the run is resumed from.",
    )

    def spool_folder(self) -> Path:
        """The spool folder: ``spool_dir`` made absolute, or the user's state folder."""
        if self.spool_dir is not None:
            return Path(self.spool_dir).expanduser().absolute()
        state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
        return Path(state) / "megaflow" / "spool"

    min_free_mb: int = Field(
        64,
        ge=0,
        description="New tasks wait (and the run says so) while a local state or artifact "
        "folder has less free space than this; 0 never waits.",
    )
    lease_ttl_s: float = Field(
        30.0,
        gt=0,
        description="The driver lease of a run (one driver per run, on every metadata "
        "store): renewed every third of this; a driver that died leaves the run to "
        "`--resume` after at most this long. Hosts driving one run must agree on the time "
        "to well within it.",
    )


class StorageConfig(_Cfg):
    metadata: MetadataConfig = Field(default_factory=SqliteMetadataConfig)
    queue: QueueConfig = Field(default_factory=MemoryQueueConfig)
    events: EventsConfig = Field(default_factory=MemoryEventsConfig)
    artifacts: ArtifactsConfig = Field(default_factory=LocalArtifactsConfig)
    outage: OutageConfig = Field(default_factory=OutageConfig)

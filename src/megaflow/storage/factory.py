"""Build stores from their configs. Backends are imported only when chosen."""

from __future__ import annotations

from dataclasses import dataclass

from megaflow.core.lifecycle import Lifecycle
from megaflow.storage.abstract import ArtifactStore, EventBus, MetadataStore, TaskQueue
from megaflow.storage.config import (
    ArtifactsConfig,
    EventsConfig,
    MetadataConfig,
    MongoMetadataConfig,
    PostgresMetadataConfig,
    QueueConfig,
    RedisEventsConfig,
    RedisQueueConfig,
    S3ArtifactsConfig,
    StorageConfig,
)


def make_metadata_store(cfg: MetadataConfig) -> MetadataStore:
    if isinstance(cfg, PostgresMetadataConfig):
        from megaflow.storage.postgres import PostgresMetadataStore

        return PostgresMetadataStore(
            cfg.dsn,
            schema=cfg.db_schema,
            min_connections=cfg.min_connections,
            max_connections=cfg.max_connections,
        )
    if isinstance(cfg, MongoMetadataConfig):
        from megaflow.storage.mongo import MongoMetadataStore

        return MongoMetadataStore(cfg.uri, database=cfg.database, transactions=cfg.transactions)
    from megaflow.storage.sqlite import SqliteMetadataStore

    return SqliteMetadataStore(cfg.path)


def make_queue(cfg: QueueConfig) -> TaskQueue:
    if isinstance(cfg, RedisQueueConfig):
        from megaflow.storage.redis_queue import RedisTaskQueue

        return RedisTaskQueue(
            cfg.url,
            cluster=cfg.cluster,
            namespace=cfg.namespace,
            consumer=cfg.consumer,
            claim_after_s=cfg.claim_after_s,
        )
    from megaflow.storage.memory_queue import MemoryTaskQueue

    return MemoryTaskQueue()


def make_event_bus(cfg: EventsConfig) -> EventBus:
    if isinstance(cfg, RedisEventsConfig):
        from megaflow.storage.redis_bus import RedisEventBus

        return RedisEventBus(
            cfg.url,
            cluster=cfg.cluster,
            namespace=cfg.namespace,
            max_len=cfg.max_len,
            stale_after_s=cfg.stale_after_s,
        )
    from megaflow.storage.memory_bus import MemoryEventBus

    return MemoryEventBus()


def make_artifact_store(cfg: ArtifactsConfig) -> ArtifactStore:
    if isinstance(cfg, S3ArtifactsConfig):
        from megaflow.storage.s3_artifacts import S3ArtifactStore

        return S3ArtifactStore(
            cfg.bucket,
            prefix=cfg.prefix,
            endpoint_url=cfg.endpoint_url,
            region=cfg.region,
            access_key_id=cfg.access_key_id,
            secret_access_key=cfg.secret_access_key,
            multipart_threshold=cfg.multipart_threshold,
            part_size=cfg.part_size,
            create_bucket=cfg.create_bucket,
        )
    from megaflow.storage.local_artifacts import LocalArtifactStore

    return LocalArtifactStore(cfg.root)


@dataclass
class Stores(Lifecycle):
    """The four stores of a run, started and stopped together."""

    metadata: MetadataStore
    queue: TaskQueue
    events: EventBus
    artifacts: ArtifactStore

    @classmethod
    def from_config(cls, cfg: StorageConfig) -> Stores:
        return cls(
            metadata=make_metadata_store(cfg.metadata),
            queue=make_queue(cfg.queue),
            events=make_event_bus(cfg.events),
            artifacts=make_artifact_store(cfg.artifacts),
        )

    async def start(self) -> None:
        started = []
        try:
            for store in (self.metadata, self.queue, self.events, self.artifacts):
                await store.start()
                started.append(store)
        except BaseException:
            for store in reversed(started):
                await store.stop()
            raise

    async def stop(self) -> None:
        for store in (self.artifacts, self.events, self.queue, self.metadata):
            await store.stop()

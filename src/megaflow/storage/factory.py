"""Build stores from their configs (each config's ``build()``); start them together."""

from __future__ import annotations

from dataclasses import dataclass

from megaflow.core.lifecycle import Lifecycle
from megaflow.storage.abstract import ArtifactStore, EventBus, MetadataStore, TaskQueue
from megaflow.storage.config import (
    ArtifactsConfig,
    EventsConfig,
    MetadataConfig,
    QueueConfig,
    StorageConfig,
)


def make_metadata_store(cfg: MetadataConfig) -> MetadataStore:
    return cfg.build()


def make_queue(cfg: QueueConfig) -> TaskQueue:
    return cfg.build()


def make_event_bus(cfg: EventsConfig) -> EventBus:
    return cfg.build()


def make_artifact_store(cfg: ArtifactsConfig) -> ArtifactStore:
    return cfg.build()


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

"""Store configs, one per backend, tagged by ``type``. The unions are the registry."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SqliteMetadataConfig(_Cfg):
    type: Literal["sqlite"] = "sqlite"
    path: str = Field(".megaflow/megaflow.db", description="Database file; ':memory:' for none.")


class MemoryQueueConfig(_Cfg):
    type: Literal["memory"] = "memory"


class MemoryEventsConfig(_Cfg):
    type: Literal["memory"] = "memory"
    buffer: int = Field(1024, ge=1, le=1_000_000, description="Events buffered per subscriber.")


class LocalArtifactsConfig(_Cfg):
    type: Literal["local"] = "local"
    root: str = Field(".megaflow/artifacts", description="Directory holding the artifacts.")


MetadataConfig = Annotated[SqliteMetadataConfig, Field(discriminator="type")]
QueueConfig = Annotated[MemoryQueueConfig, Field(discriminator="type")]
EventsConfig = Annotated[MemoryEventsConfig, Field(discriminator="type")]
ArtifactsConfig = Annotated[LocalArtifactsConfig, Field(discriminator="type")]


class StorageConfig(_Cfg):
    metadata: MetadataConfig = Field(default_factory=SqliteMetadataConfig)
    queue: QueueConfig = Field(default_factory=MemoryQueueConfig)
    events: EventsConfig = Field(default_factory=MemoryEventsConfig)
    artifacts: ArtifactsConfig = Field(default_factory=LocalArtifactsConfig)

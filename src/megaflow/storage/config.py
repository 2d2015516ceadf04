"""Store configs, one per backend, tagged by ``type``. The unions are the registry."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SqliteMetadataConfig(_Cfg):
    type: Literal["sqlite"] = "sqlite"
    path: str = Field(".megaflow/megaflow.db", description="Database file; ':memory:' for none.")


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


class MongoMetadataConfig(_Cfg):
    type: Literal["mongo"] = "mongo"
    uri: str = Field("mongodb://localhost:27017", description="MongoDB connection URI.")
    database: str = Field("megaflow", min_length=1, max_length=63, description="Database name.")
    transactions: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Multi-document transactions: 'auto' uses them on replica sets and "
        "sharded clusters only; 'off' always uses the validate-then-apply fallback.",
    )


class MemoryQueueConfig(_Cfg):
    type: Literal["memory"] = "memory"


class MemoryEventsConfig(_Cfg):
    type: Literal["memory"] = "memory"
    buffer: int = Field(1024, ge=1, le=1_000_000, description="Events buffered per subscriber.")


class LocalArtifactsConfig(_Cfg):
    type: Literal["local"] = "local"
    root: str = Field(".megaflow/artifacts", description="Directory holding the artifacts.")


MetadataConfig = Annotated[
    SqliteMetadataConfig | PostgresMetadataConfig | MongoMetadataConfig,
    Field(discriminator="type"),
]
QueueConfig = Annotated[MemoryQueueConfig, Field(discriminator="type")]
EventsConfig = Annotated[MemoryEventsConfig, Field(discriminator="type")]
ArtifactsConfig = Annotated[LocalArtifactsConfig, Field(discriminator="type")]


class StorageConfig(_Cfg):
    metadata: MetadataConfig = Field(default_factory=SqliteMetadataConfig)
    queue: QueueConfig = Field(default_factory=MemoryQueueConfig)
    events: EventsConfig = Field(default_factory=MemoryEventsConfig)
    artifacts: ArtifactsConfig = Field(default_factory=LocalArtifactsConfig)

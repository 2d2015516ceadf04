"""Build stores from their configs (each config's ``build()``); start them together.

:meth:`Stores.from_config` wraps each store so that its calls wait out
transient faults (:mod:`megaflow.storage.retrying`) under the run's
``storage.outage`` deadline; :attr:`Stores.faults` tells when one gave up.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from megaflow.core.lifecycle import Lifecycle
from megaflow.storage.abstract import ArtifactStore, EventBus, MetadataStore, TaskQueue
from megaflow.storage.config import (
    ArtifactsConfig,
    EventsConfig,
    MetadataConfig,
    OutageConfig,
    QueueConfig,
    StorageConfig,
    hide_password,
)
from megaflow.storage.outage import Faults, Outage
from megaflow.storage.retrying import (
    RetryingArtifactStore,
    RetryingEventBus,
    RetryingMetadataStore,
    RetryingTaskQueue,
    fence_writes,
)
from megaflow.storage.spool import Spool


def make_metadata_store(cfg: MetadataConfig) -> MetadataStore:
    return cfg.build()


def make_queue(cfg: QueueConfig) -> TaskQueue:
    return cfg.build()


def make_event_bus(cfg: EventsConfig) -> EventBus:
    return cfg.build()


def make_artifact_store(cfg: ArtifactsConfig) -> ArtifactStore:
    return cfg.build()


def _where(cfg: QueueConfig | EventsConfig) -> str:
    url = getattr(cfg, "url", None)
    return f"{cfg.type} at {hide_password(url)}" if url else f"{cfg.type}, in this process"


def _spool_key(md: MetadataConfig) -> str:
    """Where the metadata store lives, as the spool names it: a SQLite file by its
    absolute path, so that two projects' relative ``.megaflow/megaflow.db`` never
    share one spool file in the user's state folder."""
    path = getattr(md, "path", None)
    if md.type == "sqlite" and path is not None:
        return f"sqlite at {Path(path).absolute()}"
    return f"{md.type} {md.where()}"


@dataclass
class Stores(Lifecycle):
    """The four stores of a run, started and stopped together."""

    metadata: MetadataStore
    queue: TaskQueue
    events: EventBus
    artifacts: ArtifactStore
    faults: Faults = field(default_factory=Faults)
    """Which store, if any, stayed away past its outage deadline."""

    @classmethod
    def from_config(cls, cfg: StorageConfig) -> Stores:
        faults = Faults()

        def outage(store: str, where: str, o: OutageConfig = cfg.outage) -> Outage:
            return Outage(
                store, where, faults, deadline_s=o.deadline_s, base_s=o.backoff_base_s,
                max_s=o.backoff_max_s,
            )  # fmt: skip

        md, art = cfg.metadata, cfg.artifacts
        return cls(
            metadata=RetryingMetadataStore(
                make_metadata_store(md),
                outage("metadata", f"{md.type} {md.where()}"),
                Spool(cfg.outage.spool_folder(), _spool_key(md)) if md.kept() else None,
            ),
            queue=RetryingTaskQueue(make_queue(cfg.queue), outage("queue", _where(cfg.queue))),
            events=RetryingEventBus(
                make_event_bus(cfg.events), outage("events", _where(cfg.events))
            ),
            artifacts=RetryingArtifactStore(
                make_artifact_store(art), outage("artifacts", f"{art.type} at {art.where()}")
            ),
            faults=faults,
        )

    def fence_writes(self, fence: Callable[[], Awaitable[None]]) -> None:
        """Await ``fence`` before every metadata write (a driver lease's ``fence``)."""
        fence_writes(self.metadata, fence)

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

"""Storage: metadata, queue, events and artifacts behind one interface each.

Backends are imported lazily through :mod:`megaflow.storage.factory`.
"""

from megaflow.storage.abstract import (
    ArtifactRef,
    ArtifactStore,
    EventBus,
    MetadataStore,
    QueuedTask,
    Subscription,
    TaskQueue,
    Transition,
)

__all__ = [
    "ArtifactRef",
    "ArtifactStore",
    "EventBus",
    "MetadataStore",
    "QueuedTask",
    "Subscription",
    "TaskQueue",
    "Transition",
]

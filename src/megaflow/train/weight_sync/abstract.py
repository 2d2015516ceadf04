"""The weight-sync interface: new weights in, every engine serving them out.

The loop holds one :class:`WeightSync`, built by its config, and calls
``push(weights, version)`` after every update; it never knows which sync it
has. A sync reaches engines through :class:`EngineControl`, the weights half
of the model service's ``ModelControl`` (in this process, or a gRPC client of
another one): ``update_weights(weights, version)`` answers with the version
each replica serves. A push returns once every engine reports ``version``, or
raises an error naming the engines that did not take it; an engine that
refuses keeps serving the weights it had.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


class EngineStatus(Protocol):
    """One replica's answer to an update."""

    @property
    def name(self) -> str: ...

    @property
    def weights_version(self) -> int: ...


class EngineControl(Protocol):
    """What a sync needs of an engine: ``ModelControl.update_weights``. In process,
    ``weights`` may be a state dict; over RPC it is a path the engine can read."""

    async def update_weights(self, weights: Any, version: int) -> Sequence[EngineStatus]: ...


Engines = Mapping[str, EngineControl]
"""The engines a sync updates, by the name its errors use (an address, ``in-process``)."""


@dataclass
class SyncResult:
    """What one push did."""

    version: int
    seconds: float
    served: dict[str, int] = field(default_factory=dict)
    """The version each replica reported, by ``engine/replica``."""
    path: str | None = None
    """Where the checkpoint went, for syncs that write one."""


class WeightSync(abc.ABC):
    @abc.abstractmethod
    async def push(self, weights: Mapping[str, Any], version: int) -> SyncResult:
        """Have every engine serve ``weights`` (tensors by parameter name) as ``version``."""


def check_served(
    name: str, statuses: Sequence[EngineStatus], version: int, served: dict[str, int]
) -> str | None:
    """Record the versions ``name``'s replicas report; a problem, if one is behind."""
    behind = []
    for s in statuses:
        served[f"{name}/{s.name}"] = s.weights_version
        if s.weights_version != version:
            behind.append(f"{s.name} serves v{s.weights_version}")
    if not statuses:
        return f"{name}: no replica answered"
    return f"{name}: {', '.join(behind)}" if behind else None

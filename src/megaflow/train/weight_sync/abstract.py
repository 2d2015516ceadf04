"""The weight-sync interface: new weights in, every engine serving them out.

The loop holds one :class:`WeightSync`, built by its config, and calls
``push(weights, version)`` after every update; it never knows which sync it
has. A sync reaches engines through :class:`EngineControl`, the weights half
of the model service's ``ModelControl`` (in this process, or a gRPC client of
another one): ``update_weights(weights, version)`` answers with the version
each replica serves. A push returns once every engine reports ``version``, or
raises an error naming the engines that did not take it; an engine that
refuses keeps serving the weights it had.

The ``broadcast`` sync needs more of an engine: :class:`GroupEngineControl`,
membership of a ``torch.distributed`` group with the trainer (its wire types
are in :mod:`megaflow.core.weight_group`, shared with the engines). MegaFlow's
own engine, its ``openai`` client and the vLLM and SGLang adapters implement it.
An engine that fronts replicas whose rotation changes (the model control of a
fleet with health checks) also says who would join a group formed now
(:class:`GroupMembership`), and the sync re-forms the group when that changes.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from megaflow.core.weight_group import TensorMeta, WeightGroup


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


@runtime_checkable
class GroupEngineControl(Protocol):
    """What the ``broadcast`` sync needs of an engine: its workers join a
    ``torch.distributed`` group with the trainer's rank 0 and receive every tensor
    by broadcast (SGLang's ``init_weights_update_group`` and
    ``update_weights_from_distributed``; vLLM's worker-extension
    ``init_weight_update_group`` and ``update_weight``).

    Each tensor is broadcast on its own from rank 0, in the order of the metas,
    in its own dtype and shape; ``TensorMeta.bucket`` groups them for engines
    that are told one bucket at a time (SGLang, vLLM). An update is all or
    nothing on each engine: MegaFlow's own receives every tensor into staging
    buffers, checks names and shapes against its model, and only then swaps;
    an engine that loads as it receives rolls back to its last whole
    checkpoint. A timeout, a lost peer or a mismatch leaves the version it
    served, and the error names the engine."""

    async def weight_group_ranks(self) -> int:
        """How many ranks the engine brings to the group (one per worker or replica)."""
        ...

    async def init_weight_group(self, group: WeightGroup) -> None:
        """Join ``group`` at ranks ``group.rank_offset`` onward; returns once the group
        formed (every member, the trainer's rank 0 included, joined)."""
        ...

    async def update_weights_from_group(
        self, metas: Sequence[TensorMeta], version: int
    ) -> Sequence[EngineStatus]:
        """Receive the tensors the trainer broadcasts for ``metas`` and serve them as
        ``version``; the status of each replica. Called before the trainer
        broadcasts; returns once the swap is done or refused."""
        ...

    async def close_weight_group(self) -> None:
        """Leave the group (at the end, or after a failed update)."""
        ...


@runtime_checkable
class GroupMembership(Protocol):
    """An engine of several replicas whose membership of a group can change: a
    replica taken out of rotation leaves it, one catching up after a restart joins
    it. A group's ranks are fixed when it forms, so the ``broadcast`` sync forms a
    new one whenever ``weight_group_members`` changes."""

    async def weight_group_members(self) -> list[str]:
        """The names of the replicas that would join a group formed now."""
        ...


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

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release what the sync holds between pushes (the broadcast group)."""


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


def read_answers(
    names: Sequence[str], answers: Sequence[Any], version: int
) -> tuple[dict[str, int], list[str]]:
    """The versions every engine's replicas report, and a problem per engine that
    raised or is behind; ``answers`` from ``gather(..., return_exceptions=True)``."""
    served: dict[str, int] = {}
    problems = []
    for name, answer in zip(names, answers, strict=True):
        if isinstance(answer, BaseException):
            if not isinstance(answer, Exception):
                raise answer  # a cancellation, not a refusal
            problems.append(f"{name}: {answer}")
        else:
            problem = check_served(name, answer, version, served)
            if problem:
                problems.append(problem)
    return served, problems

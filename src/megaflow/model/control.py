"""Model control: list, add and drain the backend replicas behind a model router,
and push new weights to them.

Inference stays on the OpenAI-compatible HTTP gateway; this is the operator's
side. :class:`LocalModelControl` works on a :class:`~megaflow.model.routing.Router`
in this process; ``megaflow.rpc.model_client.GrpcModelControl`` reaches one
through the ModelControl service, and ``megaflow.rpc.model_server`` serves one.

Draining takes a replica out of the router's rotation at once (no new call
picks it), waits for its calls in flight to finish, then stops its backend.
The last routed replica cannot be drained: the router would have nowhere to
send a request.

A weights update goes to every routed replica at once; each finishes the
calls it is running on the old weights, then serves the new version. If a
replica refuses, the error names it and the versions every replica serves.
A replica that cannot be reached (a transport error) while others took the
update, or that the health check takes out while it is updating, is out of
rotation instead, and stays out (:mod:`megaflow.model.health`): the fleet
goes on at the new version. A replica ``catching_up`` (back, but behind the
fleet) takes the update too, and is put back in rotation once it serves it;
its failure never fails the update for the replicas in rotation.

Broadcast updates (the trainer's ``broadcast`` weight sync): every routed
or catching-up replica that is a :class:`WeightGroupMember` joins the
trainer's ``torch.distributed`` group, at consecutive ranks in rotation
order, and receives each update from it; the control answers for all of
them as one engine (``weight_group_ranks``, ``init_weight_group``,
``update_weights_from_group``, ``close_weight_group``: the
``GroupEngineControl`` protocol of :mod:`megaflow.train.weight_sync.abstract`).
A group's membership is fixed when it forms, so ``weight_group_members``
names the replicas that would join now: the sync re-forms the group when
that changes (a replica taken out, one back and catching up). A member found
unreachable during an update is taken out of rotation at once, so the
sync's retry forms a group without it.
"""

from __future__ import annotations

import abc
import asyncio
import itertools
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from megaflow.core.errors import (
    InvalidInput,
    MegaFlowTimeout,
    ModelError,
    NotFound,
    TransportError,
)
from megaflow.core.weight_group import TensorMeta, WeightGroup
from megaflow.model.abstract import Weights
from megaflow.model.config import ModelConfig
from megaflow.model.routing import Replica, Router


@runtime_checkable
class WeightGroupMember(Protocol):
    """A backend that takes broadcast weights: it joins the trainer's group at
    ``group.rank_offset`` onward with ``weight_group_ranks()`` ranks, and
    ``update_weights_from_group`` returns once it serves ``version`` (or raises,
    serving the version it had)."""

    async def weight_group_ranks(self) -> int: ...

    async def init_weight_group(self, group: WeightGroup) -> None: ...

    async def update_weights_from_group(
        self, metas: Sequence[TensorMeta], version: int
    ) -> object: ...

    async def close_weight_group(self) -> None: ...


@runtime_checkable
class DigestMember(Protocol):
    """A backend that tells the SHA-256 of every tensor it serves, by name."""

    async def weight_digests(self) -> dict[str, str]: ...


class BackendStatus(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    type: str
    healthy: bool = True
    draining: bool = False
    outstanding: int = 0
    served: int = 0
    weights_version: int = 0


class ModelControl(abc.ABC):
    @abc.abstractmethod
    async def list_backends(self) -> list[BackendStatus]: ...

    @abc.abstractmethod
    async def register_backend(self, config: ModelConfig) -> list[BackendStatus]:
        """Start the replicas ``config`` describes and add them to the rotation."""

    @abc.abstractmethod
    async def drain(self, name: str, timeout_s: float = 60.0) -> BackendStatus:
        """Stop routing to ``name``; return once its calls in flight finished."""

    @abc.abstractmethod
    async def update_weights(self, weights: Weights, version: int) -> list[BackendStatus]:
        """Serve ``weights`` as ``version`` on every routed replica; their new statuses.
        Over RPC, ``weights`` is a path the serving side can read."""


class LocalModelControl(ModelControl):
    def __init__(self, router: Router) -> None:
        self.router = router
        self._seq = itertools.count()
        self._names: dict[int, str] = {}  # id(replica) -> name
        self._drained: dict[str, BackendStatus] = {}
        self._grouped: list[Replica] = []
        """The replicas that joined the weight group formed last, in rank order."""
        for replica in router.replicas:
            self._name(replica)

    def _name(self, replica: Replica) -> str:
        key = id(replica)
        if key not in self._names:
            self._names[key] = f"{replica.backend.name}/{next(self._seq)}"
        return self._names[key]

    def _status(self, replica: Replica, draining: bool = False) -> BackendStatus:
        return BackendStatus(
            name=self._name(replica),
            type=replica.backend.name,
            healthy=replica.healthy and not draining,
            draining=draining,
            outstanding=replica.outstanding,
            served=replica.served,
            weights_version=replica.backend.weights_version,
        )

    async def list_backends(self) -> list[BackendStatus]:
        return [self._status(r) for r in self.router.replicas] + list(self._drained.values())

    async def register_backend(self, config: ModelConfig) -> list[BackendStatus]:
        backends = config.backends()
        for b in backends:
            await b.start()
        added = [Replica(b) for b in backends]
        self.router.replicas.extend(added)
        return [self._status(r) for r in added]

    async def drain(self, name: str, timeout_s: float = 60.0) -> BackendStatus:
        if name in self._drained:
            return self._drained[name]
        replica = next((r for r in self.router.replicas if self._name(r) == name), None)
        if replica is None:
            known = [self._name(r) for r in self.router.replicas]
            raise NotFound(f"no backend {name!r}; backends are {known}")
        if len(self.router.replicas) == 1:
            raise InvalidInput(f"{name} is the last backend; register another before draining it")
        self.router.replicas.remove(replica)
        for _ in range(max(1, int(timeout_s / 0.02))):
            if replica.outstanding == 0:
                break
            await asyncio.sleep(0.02)  # the router exposes no completion signal per replica
        else:
            self.router.replicas.append(replica)  # back in rotation: the drain did not happen
            raise MegaFlowTimeout(
                f"{name} still had {replica.outstanding} calls in flight after {timeout_s:g}s"
            )
        await replica.backend.stop()
        status = self._status(replica, draining=True)
        self._drained[name] = status
        return status

    async def update_weights(self, weights: Weights, version: int) -> list[BackendStatus]:
        # A replica out of rotation misses the update, so the health check keeps it out;
        # one catching up takes it, and its failure is its own.
        replicas = [r for r in self.router.replicas if r.healthy]
        behind = [r for r in self.router.replicas if r.catching_up and not r.healthy]
        if not replicas:
            raise ModelError(f"no backend in rotation to take weights version {version}")
        results = await asyncio.gather(
            *(
                r.until_out(r.backend.update_weights(weights, version), "an update")
                for r in replicas
            ),
            *(r.backend.update_weights(weights, version) for r in behind),
            return_exceptions=True,
        )
        for exc in results:
            if isinstance(exc, BaseException) and not isinstance(exc, Exception):
                raise exc  # a cancellation or exit, not a refusal
        self._behind_failed(behind, results[len(replicas) :], version)
        results = results[: len(replicas)]
        failed = [(r, e) for r, e in zip(replicas, results, strict=True) if e is not None]
        unreachable = [r for r, e in failed if isinstance(e, TransportError)]
        if failed and len(unreachable) == len(failed) < len(replicas):
            for r in unreachable:  # failover: the others serve the new version
                if r.healthy:  # else the health check took it out, and says why
                    self.router.take_out(r, f"unreachable during the update to weights v{version}")
            self._took(weights, version)
            self._caught_up(behind, version)
            return [self._status(r) for r in replicas if r not in unreachable]
        if failed:
            if len(failed) == len(replicas) and isinstance(failed[0][1], InvalidInput):
                raise failed[0][1]  # e.g. a stale version, refused alike by all
            served = {self._name(r): r.backend.weights_version for r in replicas}
            reasons = "; ".join(f"{self._name(r)}: {e}" for r, e in failed)
            raise ModelError(
                f"weights version {version} was refused by {len(failed)} of {len(replicas)} "
                f"backends ({reasons}); versions served now: {served}"
            )
        self._took(weights, version)
        self._caught_up(behind, version)
        return [self._status(r) for r in replicas]

    def _behind_failed(
        self, behind: Sequence[Replica], results: Sequence[object], version: int
    ) -> None:
        """A catching-up replica that did not take ``version`` stays out, saying why."""
        for r, e in zip(behind, results, strict=True):
            if isinstance(e, Exception):
                r.catching_up = False  # the next probe that it answers tries again
                r.problem = f"did not catch up to weights v{version}: {e}"

    def _took(self, weights: Weights | None, version: int) -> None:
        """The fleet serves ``version`` now; a checkpoint path it took is what a replica
        coming back loads first."""
        self.router.latest_weights = (weights, version) if isinstance(weights, str) else None
        self.router.latest_version = max(self.router.latest_version, version)

    def _caught_up(self, replicas: Sequence[Replica], version: int) -> None:
        """Put back the catching-up ``replicas`` that now serve ``version``."""
        for r in replicas:
            if r.catching_up and r.backend.weights_version == version:
                self.router.put_back(r, f"caught up to weights v{version}")

    async def weight_digests(self) -> dict[str, dict[str, str]]:
        """By replica name, the SHA-256 of each tensor it serves (``tensor_digests``);
        a replica that cannot tell is left out."""
        replicas = [r for r in self.router.replicas if isinstance(r.backend, DigestMember)]
        found = await asyncio.gather(
            *(r.backend.weight_digests() for r in replicas if isinstance(r.backend, DigestMember))
        )
        return {self._name(r): d for r, d in zip(replicas, found, strict=True)}

    # -- broadcast weight updates ---------------------------------------------

    def _members(self) -> list[tuple[Replica, WeightGroupMember]]:
        """The replicas that join a group formed now: in rotation, or catching up."""
        members = [(r, r.backend) for r in self.router.replicas if r.healthy or r.catching_up]
        if not members:
            raise ModelError("no backend in rotation or catching up to join a weight group")
        unable = [self._name(r) for r, b in members if not isinstance(b, WeightGroupMember)]
        if unable:
            raise ModelError(
                f"backends {unable} cannot join a weight-update group; use the disk weight sync"
            )
        return [(r, b) for r, b in members if isinstance(b, WeightGroupMember)]

    async def weight_group_members(self) -> list[str]:
        """The replicas a group formed now would hold; the sync re-forms on a change.
        Each member of the group formed last is probed first: one that died since
        would stall the next broadcast until its timeout, so it is taken out now."""
        grouped = [r for r in self._grouped if r.healthy or r.catching_up]
        answers = await asyncio.gather(
            *(asyncio.wait_for(r.backend.probe(), self._probe_s) for r in grouped),
            return_exceptions=True,
        )
        for r, e in zip(grouped, answers, strict=True):
            if isinstance(e, Exception):
                self.router.take_out(r, f"did not answer before a weight update: {e!r}")
        return [self._name(r) for r, _ in self._members()]

    @property
    def _probe_s(self) -> float:
        monitor = self.router.monitor
        return monitor.config.timeout_s if monitor is not None else 5.0

    async def weight_group_ranks(self) -> int:
        return sum([await b.weight_group_ranks() for _, b in self._members()])

    async def init_weight_group(self, group: WeightGroup) -> None:
        """Every member joins ``group``, the first at ``group.rank_offset``."""
        members = self._members()
        offsets, offset = [], group.rank_offset
        for _, b in members:
            offsets.append(offset)
            offset += await b.weight_group_ranks()
        self._grouped = [r for r, _ in members]
        results = await asyncio.gather(
            *(
                b.init_weight_group(group.model_copy(update={"rank_offset": o}))
                for (_, b), o in zip(members, offsets, strict=True)
            ),
            return_exceptions=True,
        )
        self._group_failures(self._grouped, results, "could not join the weight group")

    async def update_weights_from_group(
        self, metas: Sequence[TensorMeta], version: int
    ) -> list[BackendStatus]:
        """Every member of the group formed receives ``version``. A catching-up member
        that takes it is put back in rotation; one that fails stays out, and fails
        the update only if it broke the broadcast for the others."""
        # with no group formed here, each backend says it is in none
        grouped = self._grouped or [r for r, _ in self._members()]
        results = await asyncio.gather(
            *(
                r.backend.update_weights_from_group(metas, version)
                for r in grouped
                if isinstance(r.backend, WeightGroupMember)
            ),
            return_exceptions=True,
        )
        live = [(r, e) for r, e in zip(grouped, results, strict=True) if not r.catching_up]
        behind = [(r, e) for r, e in zip(grouped, results, strict=True) if r.catching_up]
        self._group_failures(
            [r for r, _ in live], [e for _, e in live], f"refused broadcast weights v{version}"
        )
        self._behind_failed([r for r, _ in behind], [e for _, e in behind], version)
        self._took(None, version)
        self._caught_up([r for r, _ in behind], version)
        return [self._status(r) for r in grouped if r.healthy]

    async def close_weight_group(self) -> None:
        """Every member of the group formed leaves it (each bounded: one that hangs
        or died is not waited for)."""
        grouped, self._grouped = self._grouped, []
        await asyncio.gather(
            *(
                asyncio.wait_for(r.backend.close_weight_group(), 10)
                for r in grouped
                if isinstance(r.backend, WeightGroupMember)
            ),
            return_exceptions=True,
        )

    def _group_failures(
        self, replicas: list[Replica], results: Sequence[object], what: str
    ) -> None:
        """Raise for the ``replicas`` whose result is an error; one that could not be
        reached is taken out of rotation first, so a group formed next leaves it out."""
        failed = [
            (r, e) for r, e in zip(replicas, results, strict=True) if isinstance(e, BaseException)
        ]
        for _, exc in failed:
            if not isinstance(exc, Exception):
                raise exc  # a cancellation or exit, not a refusal
        if not failed:
            return
        served = {self._name(r): r.backend.weights_version for r in replicas}
        reasons = "; ".join(f"{self._name(r)}: {e}" for r, e in failed)
        for r, e in failed:
            if isinstance(e, TransportError) and (r.healthy or r.catching_up):
                self.router.take_out(r, f"unreachable for the weight group: {e}")
        # a bad request refused alike by every replica stays a bad request (HTTP 400)
        bad = len(failed) == len(replicas)
        bad = bad and all(isinstance(e, InvalidInput) for _, e in failed)
        raise (InvalidInput if bad else ModelError)(
            f"{len(failed)} of {len(replicas)} backends {what} ({reasons}); "
            f"versions served now: {served}"
        )

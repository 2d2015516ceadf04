"""``broadcast``: the trainer's rank 0 sends every tensor to the engines' workers
over a ``torch.distributed`` group of their own; no checkpoint touches disk.

The first push forms the group: each engine says how many ranks it brings
(``weight_group_ranks``), the trainer hosts the group's ``TCPStore`` (on
``master_address``, a free port unless ``master_port`` is set) and joins as
rank 0 while every engine joins at its offset (``init_weight_group``). The
group is kept for later pushes. A push announces the update to every engine
over its HTTP control endpoint (names, dtypes, shapes and buckets, with the
version), then broadcasts each tensor in that order; every engine stages what
it receives, checks it, swaps, and reports the version it serves.

If anything fails (an engine refuses or dies, a tensor does not arrive within
``timeout_s``, a name or shape does not match) the push waits for every
engine's answer, leaves the group everywhere, and raises an error naming each
engine that did not take the update and the versions reported; an engine that
did not take it serves its previous weights. The next push forms a new group.

A group's ranks are fixed when it forms, so an update goes to the replicas in
rotation by forming the group anew whenever an engine's membership changes
(:class:`GroupMembership`: a replica the health checks took out leaves, one
back and catching up joins and receives the current update with the rest).
If a push fails because a member could not be reached, the engine takes that
replica out of rotation; the push then forms a group of the others and sends
the update once more, so one dead replica does not fail the step. With gloo
and NCCL alike this is the only sound way: neither lets a rank leave a group.

The sync's rank 0 never touches the default process group, so the trainer's
own ``torch.distributed`` group (FSDP, DDP) is unaffected. With ``backend:
nccl`` the tensors are sent from the GPU (the engines' workers must be on
GPUs too); with ``gloo`` from the CPU.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, Literal, TypeVar

from megaflow.core.errors import ConfigError, MegaFlowTimeout, ModelError
from megaflow.core.weight_group import (
    Member,
    TensorMeta,
    WeightGroup,
    broadcast,
    dtype_name,
    host_store,
    join,
    plan_buckets,
)
from megaflow.train.weight_sync.abstract import (
    Engines,
    EngineStatus,
    GroupEngineControl,
    GroupMembership,
    SyncResult,
    WeightSync,
    read_answers,
)

T = TypeVar("T")
log = logging.getLogger(__name__)


class BroadcastWeightSync(WeightSync):
    def __init__(
        self,
        engines: Engines,
        *,
        backend: Literal["gloo", "nccl"] = "gloo",
        master_address: str = "127.0.0.1",
        master_port: int = 0,
        bucket_mb: float = 256,
        timeout_s: float = 120.0,
        group_name: str = "megaflow-weights",
    ) -> None:
        unable = [n for n, c in engines.items() if not isinstance(c, GroupEngineControl)]
        if unable:
            raise ConfigError(
                f"engines {unable} cannot join a weight-update group; use the disk weight sync",
                [("train.weight_sync.type", "the rollout engines take no broadcast weights")],
            )
        self.engines: dict[str, GroupEngineControl] = {
            n: c for n, c in engines.items() if isinstance(c, GroupEngineControl)
        }
        self.backend = backend
        self.master_address = master_address
        self.master_port = master_port
        self.bucket_bytes = max(1, int(bucket_mb * 1024 * 1024))
        self.timeout_s = timeout_s
        self.group_name = group_name
        self._member: Member | None = None
        self._formed = itertools.count(1)
        self._members: dict[str, list[str]] = {}
        """Each engine's replicas in the group formed last."""

    async def push(self, weights: Mapping[str, Any], version: int) -> SyncResult:
        """Send ``version`` to the engines' replicas in rotation (and those catching
        up); once more, to a group without them, if some could not be reached."""
        t0 = time.perf_counter()
        try:
            return await self._push(weights, version, t0)
        except ModelError as exc:
            now = await self._membership()
            if now is None or now == self._members:
                raise
            log.warning(
                "broadcast weights v%d: the group changed (%s); sending again to %s",
                version, exc, now,
            )  # fmt: skip
            return await self._push(weights, version, t0)

    async def _membership(self) -> dict[str, list[str]] | None:
        """Each engine's replicas that would join now; None if an engine cannot say
        (then the group changes only after a failure)."""
        found: dict[str, list[str]] = {}
        for n, c in self.engines.items():
            if not isinstance(c, GroupMembership):
                return None
            try:
                found[n] = await c.weight_group_members()
            except ModelError:
                found[n] = []  # none left: forming the group says so
        return found

    async def _push(self, weights: Mapping[str, Any], version: int, t0: float) -> SyncResult:
        if self._member is not None:
            now = await self._membership()
            if now is not None and now != self._members:
                log.warning(
                    "broadcast weights v%d: re-forming the weight group, members %s -> %s",
                    version, self._members, now,
                )  # fmt: skip
                await self.close()
        if self._member is None:
            await self._form()
        member = self._member
        assert member is not None
        metas = plan_buckets(
            ((n, dtype_name(t), list(t.shape)) for n, t in weights.items()), self.bucket_bytes
        )
        names = list(self.engines)
        sending = asyncio.create_task(asyncio.to_thread(self._send, member, weights, metas))
        answers = await asyncio.gather(
            *(self._update(n, metas, version) for n in names), return_exceptions=True
        )
        sent = (await asyncio.gather(sending, return_exceptions=True))[0]
        served, problems = read_answers(names, answers, version)
        if isinstance(sent, BaseException) and not problems:
            problems.append(f"the trainer's broadcast failed: {sent}")
        if problems:
            await self.close()
            raise ModelError(
                f"broadcast weights v{version} did not reach {len(problems)} of "
                f"{len(names)} engines: {'; '.join(problems)}. An engine that did not take "
                f"them keeps serving its previous weights; versions reported: {served or 'none'}"
            )
        return SyncResult(version=version, seconds=time.perf_counter() - t0, served=served)

    def _send(
        self, member: Member, weights: Mapping[str, Any], metas: Sequence[TensorMeta]
    ) -> None:
        device = "cuda" if self.backend == "nccl" else "cpu"
        for meta in metas:
            broadcast(member, weights[meta.name].detach().to(device).contiguous())

    async def _update(
        self, name: str, metas: Sequence[TensorMeta], version: int
    ) -> Sequence[EngineStatus]:
        engine = self.engines[name]
        return await self._bounded(name, engine.update_weights_from_group(metas, version))

    async def _bounded(self, name: str, call: Awaitable[T]) -> T:
        # The engine's own receive times out after timeout_s; the margin lets it say so.
        limit = self.timeout_s * 2 + 30
        try:
            return await asyncio.wait_for(call, limit)
        except TimeoutError as exc:
            if isinstance(exc, MegaFlowTimeout):
                raise
            raise MegaFlowTimeout(f"engine {name} did not answer within {limit:g}s") from None

    async def _form(self) -> None:
        """A new group: the trainer at rank 0, each engine's ranks after it."""
        self._members = await self._membership() or {}
        ranks = {n: await self._bounded(n, c.weight_group_ranks()) for n, c in self.engines.items()}
        world = 1 + sum(ranks.values())
        store = await asyncio.to_thread(
            host_store, self.master_address, self.master_port, world, self.timeout_s
        )
        group = WeightGroup(
            master_address=self.master_address,
            master_port=store.port,
            rank_offset=1,
            world_size=world,
            group_name=f"{self.group_name}-{next(self._formed)}",
            backend=self.backend,
            timeout_s=self.timeout_s,
        )
        names, joins, offset = list(self.engines), [], 1
        for n in names:
            spec = group.model_copy(update={"rank_offset": offset})
            joins.append(self._bounded(n, self.engines[n].init_weight_group(spec)))
            offset += ranks[n]
        mine = asyncio.to_thread(join, group, 0, store)
        results = await asyncio.gather(mine, *joins, return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException) and not isinstance(r, Exception):
                raise r
        failed = [f"{n}: {r}" for n, r in zip(names, results[1:], strict=True) if r is not None]
        if failed or isinstance(results[0], Exception):
            await self.close()
            mine_failed = results[0] if isinstance(results[0], Exception) else None
            raise ModelError(
                f"the weight-update group {group.group_name} at {self.master_address}:"
                f"{store.port} did not form: {'; '.join(failed) or mine_failed}"
            )
        assert isinstance(results[0], Member)
        self._member = results[0]

    async def close(self) -> None:
        """Every engine leaves the group, and so does the trainer."""
        self._member = None
        await asyncio.gather(
            *(asyncio.wait_for(c.close_weight_group(), 30) for c in self.engines.values()),
            return_exceptions=True,
        )

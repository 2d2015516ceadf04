"""Routing of model calls across a backend's replicas.

The router sends each call to the healthy replica with the fewest calls in
flight, holds a concurrency cap and a token bucket for the backend as a
whole, bounds every try with a timeout, and retries only transport errors
(the backend could not be reached), never a model error or a timeout: a
timeout means the backend may still be working, and a second try would
double its load.

All calls of one trajectory go to the replica its first call went to, which
holds that trajectory's token-in state and prefix cache. Once that replica
has answered the trajectory with token ids (tokens a trainer joins into one
sequence), the trajectory is pinned there: if the replica then fails or
leaves the rotation, the call raises :class:`ReplicaLost` instead of being
retried elsewhere, because another replica would re-render the history and
its tokens would not be those the first one generated. ``ReplicaLost`` is a
transport error, so the scheduler retries the whole attempt (a new
trajectory from the first turn, up to the task's ``max_attempts``); no
episode is ever recorded across two replicas. A trajectory without token ids
(a hosted API) has its call retried on another replica as before.

With a health check configured (:mod:`megaflow.model.health`), a replica that
stops answering probes is taken out of rotation and its calls in flight are
aborted as transport errors; it is put back when it answers again at the
fleet's weights version (:attr:`Replica.catching_up` marks one that answers
but is behind, waiting for the next update). :meth:`Router.health` is what
the Prometheus collector of :mod:`megaflow.monitoring.model` reads.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

from megaflow.core.errors import InvalidInput, MegaFlowTimeout, ReplicaLost, TransportError
from megaflow.model.abstract import UNASSIGNED, Backend, CallContext, ChatRequest, Completion
from megaflow.model.config import HealthCheckConfig
from megaflow.model.health import HealthMonitor
from megaflow.monitoring.model import ReplicaHealth

log = logging.getLogger(__name__)
T = TypeVar("T")


class TokenBucket:
    """``rate`` tokens a second, at most ``burst`` saved up. ``acquire`` waits for one."""

    def __init__(
        self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if rate <= 0 or burst < 1:
            raise InvalidInput(f"token bucket needs rate > 0 and burst >= 1, got {rate}, {burst}")
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
        self._last = now

    def try_acquire(self) -> bool:
        self._refill()
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False

    async def acquire(self) -> None:
        async with self._lock:  # first come, first served
            while not self.try_acquire():  # noqa: ASYNC110 - the wait is computed, not polled
                await asyncio.sleep((1 - self._tokens) / self.rate)


class Replica:
    """A backend instance, the calls it has in flight, and whether it is in rotation."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.outstanding = 0
        self.served = 0
        self.healthy = True
        self.problem: str | None = None
        """Why the replica is out of rotation (None while it is in)."""
        self.catching_up = False
        """Out of rotation, answering, but at an older weights version: the next
        update goes to it too, and puts it back once it serves that version."""
        self.probe_failures = 0
        """Health probes it failed, over its life (a Prometheus counter)."""
        self.take_outs = 0
        """Times it was taken out of rotation (a Prometheus counter)."""
        self._out = asyncio.Event()  # set while out of rotation: aborts calls in flight

    async def call(self, request: ChatRequest, ctx: CallContext) -> Completion:
        """The backend's answer, or TransportError if the replica is taken out first."""
        return await self.until_out(self.backend.complete(request, ctx), "a call")

    async def until_out(self, work: Coroutine[Any, Any, T], what: str) -> T:
        """``work``'s result; if the replica is taken out of rotation first, ``work``
        is cancelled and TransportError raised (``what`` names it in the message)."""
        done = asyncio.ensure_future(work)
        out = asyncio.ensure_future(self._out.wait())
        try:
            await asyncio.wait({done, out}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            out.cancel()
            if not done.done():
                done.cancel()
        if not done.done() or done.cancelled():
            raise TransportError(
                f"{self.backend.name} was taken out of rotation with {what} in flight "
                f"({self.problem})"
            )
        return done.result()


class Router:
    """Least-outstanding-requests routing with a cap, a bucket, timeouts and retries."""

    def __init__(
        self,
        replicas: Sequence[Backend],
        *,
        max_concurrency: int = 64,
        requests_per_s: float | None = None,
        burst: int = 16,
        timeout_s: float = 120.0,
        retries: int = 2,
        backoff_s: float = 0.05,
        health: HealthCheckConfig | None = None,
    ) -> None:
        if not replicas:
            raise InvalidInput("a router needs at least one backend replica")
        self.replicas = [Replica(b) for b in replicas]
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self._cap = asyncio.Semaphore(max_concurrency)
        self._bucket = TokenBucket(requests_per_s, burst) if requests_per_s else None
        self._next = 0
        self._affinity: OrderedDict[str, tuple[Replica, bool]] = OrderedDict()
        """Trajectory id -> its replica, and whether it is pinned there (token ids given)."""
        self.max_affinities = 100_000  # trajectories never released must not grow memory
        self.latest_weights: tuple[str, int] | None = None
        """The checkpoint path and version of the last update the replicas in rotation
        took (set by the model control); a replica put back after it loads it first."""
        self.latest_version = 0
        """The version of the last update the fleet took, however it travelled (set by
        the model control): no replica serving less is put back in rotation."""
        self.monitor = HealthMonitor(self, health) if health is not None else None

    @property
    def outstanding(self) -> int:
        return sum(r.outstanding for r in self.replicas)

    async def start(self) -> None:
        for r in self.replicas:
            await r.backend.start()
        if self.monitor is not None:
            await self.monitor.start()

    async def stop(self) -> None:
        if self.monitor is not None:
            await self.monitor.stop()
        for r in self.replicas:
            await r.backend.stop()

    def take_out(self, replica: Replica, reason: str) -> None:
        """No new call picks ``replica``; its calls in flight end with a transport error."""
        if replica.healthy:
            replica.take_outs += 1
        replica.healthy = False
        replica.catching_up = False
        replica.problem = reason
        replica._out.set()
        log.warning("model replica %s taken out of rotation: %s", replica.backend.name, reason)

    def put_back(self, replica: Replica, why: str = "answers again") -> None:
        """``replica`` serves the fleet's version: calls may pick it again."""
        replica.healthy = True
        replica.catching_up = False
        replica.problem = None
        replica._out = asyncio.Event()
        log.warning(
            "model replica %s is back in rotation at weights v%d (%s)",
            replica.backend.name, replica.backend.weights_version, why,
        )  # fmt: skip

    def fleet_version(self) -> int:
        """The version a replica must serve to be in rotation: the last update's, or
        newer if a replica in rotation serves newer (an update under way)."""
        served = (r.backend.weights_version for r in self.replicas if r.healthy)
        return max([self.latest_version, *served])

    def health(self) -> list[ReplicaHealth]:
        """Each replica's rotation state, version and counters, for metrics."""
        return [
            ReplicaHealth(
                replica=r.backend.name,
                in_rotation=r.healthy,
                catching_up=r.catching_up,
                weights_version=r.backend.weights_version,
                probe_failures=r.probe_failures,
                take_outs=r.take_outs,
            )
            for r in self.replicas
        ]

    def release(self, trajectory_id: str) -> None:
        """Tell every replica's backend to forget ``trajectory_id``."""
        self._affinity.pop(trajectory_id, None)
        for r in self.replicas:
            r.backend.release(trajectory_id)

    def pick(self, trajectory_id: str = UNASSIGNED) -> Replica:
        """The trajectory's replica if it is still routed; else the healthy one with
        the fewest calls in flight (ties rotate), which the trajectory then keeps.
        Raises ReplicaLost for a trajectory pinned to a replica that is gone."""
        if trajectory_id != UNASSIGNED:
            kept = self._affinity.get(trajectory_id)
            if kept is not None:
                replica, pinned = kept
                if replica.healthy and replica in self.replicas:
                    self._affinity.move_to_end(trajectory_id)
                    return replica
                if pinned:
                    del self._affinity[trajectory_id]
                    why = replica.problem or "drained"
                    raise ReplicaLost(
                        f"trajectory {trajectory_id}: its replica {replica.backend.name} left "
                        f"the rotation ({why}) holding its earlier turns; the episode must "
                        "start again"
                    )
            chosen = self._least()
            self._affinity[trajectory_id] = (chosen, False)
            if len(self._affinity) > self.max_affinities:
                self._affinity.popitem(last=False)
            return chosen
        return self._least()

    def _least(self) -> Replica:
        n = len(self.replicas)
        order = [self.replicas[(self._next + i) % n] for i in range(n)]
        self._next = (self._next + 1) % n
        live = [r for r in order if r.healthy]
        if not live:
            why = "; ".join(f"{r.backend.name}: {r.problem}" for r in self.replicas)
            raise TransportError(f"no model replica is in rotation ({why})")
        return min(live, key=lambda r: r.outstanding)

    async def complete(self, request: ChatRequest, ctx: CallContext) -> Completion:
        attempt = 0
        while True:
            try:
                return await self._try(request, ctx)
            except ReplicaLost:
                raise
            except TransportError as exc:
                kept = self._affinity.pop(ctx.trajectory_id, None)  # the retry may go elsewhere
                if kept is not None and kept[1]:
                    raise ReplicaLost(
                        f"trajectory {ctx.trajectory_id}: its replica {kept[0].backend.name} "
                        f"holds its earlier turns and failed ({exc}); the episode must start "
                        "again"
                    ) from exc
                if attempt >= self.retries:
                    raise TransportError(
                        f"model backend unreachable after {attempt + 1} tries: {exc}"
                    ) from exc
                delay = self.backoff_s * 2**attempt
                attempt += 1
                log.warning("transport error (%s); retry %d in %.2fs", exc, attempt, delay)
                await asyncio.sleep(delay)

    async def _try(self, request: ChatRequest, ctx: CallContext) -> Completion:
        if self._bucket is not None:
            await self._bucket.acquire()
        async with self._cap:
            replica = self.pick(ctx.trajectory_id)
            replica.outstanding += 1
            try:
                async with asyncio.timeout(self.timeout_s):
                    if self.monitor is None:  # nothing takes a replica out while it answers
                        completion = await replica.backend.complete(request, ctx)
                    else:
                        completion = await replica.call(request, ctx)
            except MegaFlowTimeout:
                raise
            except TimeoutError as exc:
                raise MegaFlowTimeout(
                    f"model backend {replica.backend.name!r} gave no answer within "
                    f"{self.timeout_s:g}s (trajectory {ctx.trajectory_id}); raise timeout_s "
                    "or check the backend"
                ) from exc
            finally:
                replica.outstanding -= 1
                replica.served += 1
            self._pin(ctx.trajectory_id, replica, completion)
            return completion

    def _pin(self, trajectory_id: str, replica: Replica, completion: Completion) -> None:
        """A trajectory answered with token ids is pinned to the replica that gave them."""
        if completion.token_ids is None or trajectory_id == UNASSIGNED:
            return
        kept = self._affinity.get(trajectory_id)
        if kept is not None and kept[0] is replica and not kept[1]:
            self._affinity[trajectory_id] = (replica, True)

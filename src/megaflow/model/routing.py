"""Routing of model calls across a backend's replicas.

The router sends each call to the replica with the fewest calls in flight
(all calls of one trajectory to the replica its first call went to, which
holds that trajectory's token-in state and prefix cache; a transport error or
a drain ends the affinity), holds a concurrency cap and a token bucket for the
backend as a whole, bounds every try with a timeout, and retries only
transport errors (the backend could not be reached), never a model error or a
timeout: a timeout means the backend may still be working, and a second try
would double its load.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

from megaflow.core.errors import InvalidInput, MegaFlowTimeout, TransportError
from megaflow.model.abstract import UNASSIGNED, Backend, CallContext, ChatRequest, Completion

log = logging.getLogger(__name__)


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
    """A backend instance and the calls it has in flight."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.outstanding = 0
        self.served = 0


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
        self._affinity: OrderedDict[str, Replica] = OrderedDict()
        self.max_affinities = 100_000  # trajectories never released must not grow memory

    @property
    def outstanding(self) -> int:
        return sum(r.outstanding for r in self.replicas)

    async def start(self) -> None:
        for r in self.replicas:
            await r.backend.start()

    async def stop(self) -> None:
        for r in self.replicas:
            await r.backend.stop()

    def release(self, trajectory_id: str) -> None:
        """Tell every replica's backend to forget ``trajectory_id``."""
        self._affinity.pop(trajectory_id, None)
        for r in self.replicas:
            r.backend.release(trajectory_id)

    def pick(self, trajectory_id: str = UNASSIGNED) -> Replica:
        """The trajectory's replica if it has one still routed; else the one with the
        fewest calls in flight (ties rotate), which the trajectory then keeps."""
        if trajectory_id != UNASSIGNED:
            kept = self._affinity.get(trajectory_id)
            if kept is not None and kept in self.replicas:
                self._affinity.move_to_end(trajectory_id)
                return kept
            chosen = self._least()
            self._affinity[trajectory_id] = chosen
            if len(self._affinity) > self.max_affinities:
                self._affinity.popitem(last=False)
            return chosen
        return self._least()

    def _least(self) -> Replica:
        n = len(self.replicas)
        order = [self.replicas[(self._next + i) % n] for i in range(n)]
        self._next = (self._next + 1) % n
        return min(order, key=lambda r: r.outstanding)

    async def complete(self, request: ChatRequest, ctx: CallContext) -> Completion:
        attempt = 0
        while True:
            try:
                return await self._try(request, ctx)
            except TransportError as exc:
                self._affinity.pop(ctx.trajectory_id, None)  # the retry may go elsewhere
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
                    return await replica.backend.complete(request, ctx)
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

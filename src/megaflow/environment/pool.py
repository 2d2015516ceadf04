"""Sandbox pools: how tasks get a sandbox, in either execution mode.

``acquire(spec, owner)`` hands out a ready sandbox and ``release(sandbox)``
takes it back:

- **ephemeral**: every task gets a fresh sandbox, destroyed on release;
- **persistent**: per spec, between ``min`` and ``max`` sandboxes are kept;
  on release a sandbox is reset (processes killed, workspace restored to the
  snapshot taken after setup) and waits for the next task. A sandbox whose
  reset fails for any reason is destroyed, never handed out again: the
  runtime's reset fails whenever it cannot prove every process of the last
  task gone and its files restored.

In both modes a **warm share** of spare, started sandboxes is kept per spec:
``ceil(warm_share * max(busy, min, 1))`` of them (none when the share is 0),
never more than ``max`` in all. Spares are started in the background, no
faster than ``refill_per_s``, so an acquire usually needs no start at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from megaflow.core.errors import InvalidInput, MegaFlowError
from megaflow.core.lifecycle import Lifecycle
from megaflow.environment.abstract import EnvironmentSpec, Runtime, Sandbox
from megaflow.environment.config import EnvironmentConfig, PoolConfig
from megaflow.monitoring.environment import EnvironmentMetrics

Mode = Literal["ephemeral", "persistent"]


@dataclass
class _SpecPool:
    spec: EnvironmentSpec
    idle: deque[Sandbox] = field(default_factory=deque)
    busy: set[str] = field(default_factory=set)
    starting: int = 0
    freed: asyncio.Condition = field(default_factory=asyncio.Condition)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    @property
    def total(self) -> int:
        return len(self.idle) + len(self.busy) + self.starting


class _RateLimit:
    """At most ``rate`` events per second, one at a time."""

    def __init__(self, rate: float) -> None:
        self.interval = 1.0 / rate
        self.next = 0.0

    async def wait(self) -> None:
        now = time.monotonic()
        if self.next > now:
            await asyncio.sleep(self.next - now)
        self.next = max(now, self.next) + self.interval


class SandboxPool(Lifecycle):
    """Hands out sandboxes of a runtime by spec, in ephemeral or persistent mode."""

    def __init__(
        self,
        runtime: Runtime,
        mode: Mode = "ephemeral",
        cfg: PoolConfig | None = None,
        metrics: EnvironmentMetrics | None = None,
    ) -> None:
        self.runtime = runtime
        self.mode = mode
        self.cfg = cfg or PoolConfig()
        if self.cfg.min > self.cfg.max:
            raise InvalidInput(f"pool min ({self.cfg.min}) exceeds max ({self.cfg.max})")
        self.metrics = metrics
        self._pools: dict[str, _SpecPool] = {}
        self._where: dict[str, _SpecPool] = {}
        self._limit = _RateLimit(self.cfg.refill_per_s)
        self._closed = False
        self.refill_errors = 0

    @classmethod
    def from_config(
        cls, runtime: Runtime, cfg: EnvironmentConfig, metrics: EnvironmentMetrics | None = None
    ) -> SandboxPool:
        """The pool an environment config asks for (its mode and pool sizes)."""
        return cls(runtime, cfg.mode, cfg.pool, metrics)

    def _pool(self, spec: EnvironmentSpec) -> _SpecPool:
        key = spec.key()
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pools[key] = _SpecPool(spec)
            pool.task = asyncio.get_running_loop().create_task(self._refill(pool))
        return pool

    def spares_wanted(self, pool: _SpecPool) -> int:
        if self.cfg.warm_share <= 0:
            want = 0
        else:
            want = math.ceil(self.cfg.warm_share * max(len(pool.busy), self.cfg.min, 1))
        if self.mode == "persistent":
            want = max(want, self.cfg.min - len(pool.busy))
        return max(0, min(want, self.cfg.max - len(pool.busy)))

    async def prewarm(self, spec: EnvironmentSpec) -> None:
        """Start the spares of ``spec`` now and wait until they are ready."""
        pool = self._pool(spec)
        while len(pool.idle) + pool.starting < self.spares_wanted(pool):
            await self._start_spare(pool)

    async def prefetch(self, specs: Sequence[EnvironmentSpec]) -> None:
        """Tell the runtime which specs start next (:meth:`Runtime.prefetch`)."""
        await self.runtime.prefetch(specs)

    async def acquire(
        self, spec: EnvironmentSpec, owner: str | None = None, task_deadline: float | None = None
    ) -> Sandbox:
        """A ready sandbox of ``spec`` for ``owner``. With ``task_deadline`` (wall
        clock), only a sandbox that outlives it is handed out."""
        if self._closed:
            raise InvalidInput("the sandbox pool is stopped")
        if task_deadline is not None and time.time() + spec.ttl_s <= task_deadline:
            raise InvalidInput(
                f"spec ttl_s={spec.ttl_s} ends before the task deadline; raise ttl_s"
            )
        pool = self._pool(spec)
        t0 = time.perf_counter()
        while True:
            sandbox = await self._take_idle(pool, task_deadline)
            if sandbox is not None:
                if self.metrics is not None:
                    self.metrics.start_seconds.labels(self.runtime.name, "warm").observe(
                        time.perf_counter() - t0
                    )
                break
            if pool.total < self.cfg.max or self.mode == "ephemeral":
                pool.starting += 1
                try:
                    sandbox = await self.runtime.create(spec, owner=owner)
                finally:
                    pool.starting -= 1
                break
            async with pool.freed:
                await pool.freed.wait()
        sandbox.info.owner = owner
        pool.busy.add(sandbox.id)
        self._where[sandbox.id] = pool
        pool.wake.set()
        return sandbox

    async def _take_idle(self, pool: _SpecPool, task_deadline: float | None) -> Sandbox | None:
        while pool.idle:
            sandbox = pool.idle.popleft()
            if sandbox.info.state == "stopped":
                continue  # reaped or failed while idle
            if task_deadline is not None and sandbox.info.deadline <= task_deadline:
                await sandbox.destroy()  # would die before the task ends
                continue
            return sandbox
        return None

    async def release(self, sandbox: Sandbox, broken: bool = False) -> None:
        """Give a sandbox back: destroyed (ephemeral, or ``broken``) or reset for reuse."""
        pool = self._where.pop(sandbox.id, None)
        if pool is not None:
            pool.busy.discard(sandbox.id)
        sandbox.info.owner = None
        keep = self.mode == "persistent" and not broken and not self._closed and pool is not None
        failure: Exception | None = None
        if keep:
            try:
                await sandbox.reset()
            except Exception as e:  # whatever failed, a sandbox not reset is never reused
                keep = False
                failure = None if isinstance(e, MegaFlowError) else e
                if self.metrics is not None:
                    self.metrics.failed(self.runtime.name, "reset")
        if keep and pool is not None and pool.total < self.cfg.max:
            pool.idle.append(sandbox)
        else:
            await sandbox.destroy()
        if pool is not None:
            async with pool.freed:
                pool.freed.notify()
            pool.wake.set()
        if failure is not None:
            raise failure

    async def _start_spare(self, pool: _SpecPool) -> None:
        pool.starting += 1
        try:
            sandbox = await self.runtime.create(pool.spec, owner=None)
        finally:
            pool.starting -= 1
        if self._closed:
            await sandbox.destroy()
            return
        pool.idle.append(sandbox)
        async with pool.freed:
            pool.freed.notify()

    async def _refill(self, pool: _SpecPool) -> None:
        """Background: keep the spares of one spec topped up, under the rate limit."""
        while not self._closed:
            idle = sum(1 for sb in pool.idle if sb.info.state != "stopped")
            if idle + pool.starting >= self.spares_wanted(pool) or pool.total >= self.cfg.max:
                pool.wake.clear()
                await pool.wake.wait()
                continue
            await self._limit.wait()
            try:
                await self._start_spare(pool)
            except MegaFlowError:
                self.refill_errors += 1
                if self.metrics is not None:
                    self.metrics.failed(self.runtime.name, "refill")
                await asyncio.sleep(min(5.0, 0.1 * 2 ** min(self.refill_errors, 6)))

    def counts(self) -> dict[str, dict[str, int]]:
        """Per spec key: busy, idle and starting sandboxes."""
        return {
            key: {"busy": len(p.busy), "idle": len(p.idle), "starting": p.starting}
            for key, p in self._pools.items()
        }

    async def start(self) -> None:
        """Nothing to do until the first acquire; present for symmetry."""

    async def stop(self) -> None:
        """Destroy idle sandboxes and stop refilling. Busy ones stay with their
        tasks; releasing them afterwards destroys them."""
        self._closed = True
        for pool in self._pools.values():
            if pool.task is not None:
                pool.task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await pool.task
            idle, pool.idle = list(pool.idle), deque()
            await asyncio.gather(*(sb.destroy() for sb in idle))

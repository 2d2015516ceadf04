"""``NodeExecutor``: each attempt runs against the node agent it was placed on.

The scheduler places a task on an instance (a Ray node) and hands the
executor a :class:`~megaflow.scheduler.abstract.TaskContext` naming it. The
executor keeps, per instance, a :class:`~megaflow.rpc.environment_client.GrpcRuntime`
to that node's agent, a :class:`~megaflow.environment.pool.SandboxPool` over
it and the attempt executor ``make`` builds over the pool (the app's
:class:`~megaflow.app.attempt.AgentExecutor`), so every sandbox of the
attempt is created, run and graded on that node. When the fleet loses an
instance, :meth:`NodeExecutor.forget` drops its parts; the scheduler has
already interrupted the attempts that ran there. An attempt that could not
reach its node agent asks the fleet to check that node at once
(``unreachable``) before its error goes back to the scheduler, so that its
retry is not placed on a node that is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from megaflow.core.errors import InfraError, TransportError
from megaflow.core.tasks import TaskResult
from megaflow.environment.config import EnvironmentConfig
from megaflow.environment.pool import SandboxPool
from megaflow.monitoring.environment import EnvironmentMetrics
from megaflow.rpc.environment_client import GrpcRuntime
from megaflow.scheduler.abstract import TaskContext, TaskExecutor

MakeExecutor = Callable[[SandboxPool], TaskExecutor]
Unreachable = Callable[[str], Awaitable[None]]
STOP_S = 10.0
"""Longest wait for one node's pool and channel to close (the node may be gone)."""


@dataclass(slots=True)
class _NodeParts:
    runtime: GrpcRuntime
    pool: SandboxPool
    executor: TaskExecutor


class NodeExecutor(TaskExecutor):
    """Routes each attempt to its instance's node agent."""

    def __init__(
        self,
        target: Callable[[str], str | None],
        token: str,
        make: MakeExecutor,
        environment: EnvironmentConfig,
        metrics: EnvironmentMetrics | None = None,
        unreachable: Unreachable | None = None,
    ) -> None:
        self.target = target
        self.unreachable = unreachable
        """Told the instance whose agent could not be reached, before the error is raised."""
        self.token = token
        self.make = make
        self.environment = environment
        self.metrics = metrics
        self._nodes: dict[str, _NodeParts] = {}
        self._lock = asyncio.Lock()

    async def run(self, ctx: TaskContext) -> TaskResult:
        parts = await self._parts(ctx.instance)
        try:
            return await parts.executor.run(ctx)
        except TransportError:
            # The retry must not land on a node that is gone: the fleet checks it
            # now, instead of at its next ping.
            if self.unreachable is not None:
                await self.unreachable(ctx.instance)
            raise

    async def _parts(self, instance: str) -> _NodeParts:
        async with self._lock:
            parts = self._nodes.get(instance)
            if parts is not None:
                return parts
            target = self.target(instance)
            if target is None:
                raise InfraError(f"instance {instance} has no node agent (its node left)")
            env = self.environment
            runtime = GrpcRuntime(target, self.token)
            await runtime.start()
            pool = SandboxPool(runtime, env.mode, env.pool, self.metrics)
            await pool.start()
            executor = self.make(pool)
            await executor.start()
            parts = self._nodes[instance] = _NodeParts(runtime, pool, executor)
            return parts

    async def forget(self, instance: str) -> None:
        """Drop an instance's parts (its node is gone or going)."""
        async with self._lock:
            parts = self._nodes.pop(instance, None)
        if parts is not None:
            await _close(parts)

    async def stop(self) -> None:
        async with self._lock:
            nodes, self._nodes = list(self._nodes.values()), {}
        await asyncio.gather(*(_close(p) for p in nodes))


async def _close(parts: _NodeParts) -> None:
    for step in (parts.executor.stop, parts.pool.stop, parts.runtime.stop):
        with contextlib.suppress(Exception):
            await asyncio.wait_for(step(), STOP_S)

"""Fault injection for the reliability suite: a runtime that fails on purpose,
and an executor that runs each task in a real sandbox of a pool.

:class:`FaultyRuntime` wraps any runtime and makes a seeded share of sandbox
creations fail with ``SandboxStartError`` (an infrastructure error, so the
scheduler retries it). :class:`SandboxTaskExecutor` takes a sandbox from the
pool, runs one command in it (``payload["command"]``, ``echo ok`` by
default) and gives it back on every path; the task's
``payload["then"]`` may ask it to end otherwise: ``agent`` (an agent error),
``timeout`` (a deadline), ``hang`` (until cancelled).
"""

from __future__ import annotations

import asyncio
import random

from megaflow.core.errors import AgentError, MegaFlowTimeout, SandboxStartError
from megaflow.core.states import TaskState
from megaflow.core.tasks import TaskResult
from megaflow.environment.abstract import EnvironmentSpec, Runtime, Sandbox, SandboxInfo
from megaflow.environment.pool import SandboxPool
from megaflow.scheduler.abstract import TaskContext, TaskExecutor


class FaultyRuntime(Runtime):
    """``inner``, except that a share ``rate`` of creations fails before starting."""

    def __init__(self, inner: Runtime, rate: float, seed: int = 0) -> None:
        self.inner = inner
        self.name = inner.name
        self.rate = rate
        self.rng = random.Random(seed)
        self.calls = 0
        self.injected = 0
        self.created = 0

    async def start(self) -> None:
        await self.inner.start()

    async def stop(self) -> None:
        await self.inner.stop()

    async def create(self, spec: EnvironmentSpec, owner: str | None = None) -> Sandbox:
        self.calls += 1
        if self.rng.random() < self.rate:
            self.injected += 1
            raise SandboxStartError(f"injected sandbox start failure (owner {owner})")
        sandbox = await self.inner.create(spec, owner=owner)
        self.created += 1
        return sandbox

    async def list(self) -> list[SandboxInfo]:
        return await self.inner.list()

    async def destroy(self, sandbox_id: str) -> None:
        await self.inner.destroy(sandbox_id)

    async def reap_orphans(self) -> int:
        return await self.inner.reap_orphans()


class SandboxTaskExecutor(TaskExecutor):
    """One sandbox per attempt from ``pool``; one command in it; released always."""

    def __init__(self, pool: SandboxPool, spec: EnvironmentSpec) -> None:
        self.pool = pool
        self.spec = spec
        self.in_use: set[str] = set()
        self.released = 0

    async def run(self, ctx: TaskContext) -> TaskResult:
        ctx.stage(TaskState.STARTING)
        sandbox = await self.pool.acquire(self.spec, owner=ctx.spec.id)
        self.in_use.add(sandbox.id)
        try:
            ctx.stage(TaskState.RUNNING)
            then = ctx.spec.payload.get("then")
            if then == "agent":
                raise AgentError(f"injected agent failure of {ctx.spec.id}")
            if then == "timeout":
                raise MegaFlowTimeout(f"injected timeout of {ctx.spec.id}")
            if then == "hang":
                await asyncio.Event().wait()
            command = str(ctx.spec.payload.get("command", "echo ok"))
            out = await sandbox.exec(command, timeout=60)
            ctx.stage(TaskState.GRADING)
        finally:
            self.in_use.discard(sandbox.id)
            await asyncio.shield(self.pool.release(sandbox, broken=True))
            self.released += 1
        ok = out.exit_code == 0 and out.stdout.strip() == "ok"
        return TaskResult(task_id=ctx.spec.id, success=ok, reward=float(ok))

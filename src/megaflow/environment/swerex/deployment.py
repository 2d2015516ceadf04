"""A SWE-ReX deployment whose runtime is a MegaFlow sandbox.

SWE-agent's ``SWEEnv`` (and other SWE-ReX users) take an
``AbstractDeployment``: ``start()`` brings a runtime up, ``runtime`` hands
it out, ``stop()`` tears it down. :class:`SandboxDeployment` gets its
sandbox from a MegaFlow :class:`Runtime` (created on start, destroyed on
stop), from a :class:`SandboxPool` (acquired and released, so a pool's warm
spares and persistent resets apply), or uses one the caller already holds
(left running on stop).

Like the runtime, its calls run on its home loop (the one the MegaFlow
runtime or pool lives on; given as ``loop``, else the loop that built the
deployment), so SWE-agent's ``asyncio.run`` around each call works while
MegaFlow runs its loop in another thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Self

from swerex.deployment.abstract import AbstractDeployment
from swerex.deployment.hooks.abstract import CombinedDeploymentHook, DeploymentHook
from swerex.exceptions import DeploymentNotStartedError
from swerex.runtime.abstract import IsAliveResponse

from megaflow.environment.abstract import EnvironmentSpec, Runtime, Sandbox
from megaflow.environment.pool import SandboxPool
from megaflow.environment.swerex.runtime import SandboxRuntime, on_home_loop, running_loop

Acquire = Callable[[], Awaitable[Sandbox]]
Release = Callable[[Sandbox], Awaitable[None]]


async def _keep(sandbox: Sandbox) -> None:
    """Leave a caller's sandbox as it is."""


class SandboxDeployment(AbstractDeployment):
    """A deployment over one MegaFlow sandbox at a time."""

    def __init__(
        self,
        acquire: Acquire,
        release: Release,
        *,
        loop: asyncio.AbstractEventLoop | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        self.home_loop = loop or running_loop()
        self._acquire = acquire
        self._release = release
        self.logger = logger or logging.getLogger("megaflow.swerex")
        self._hooks = CombinedDeploymentHook()
        self._sandbox: Sandbox | None = None
        self._runtime: SandboxRuntime | None = None

    @classmethod
    def on_runtime(
        cls,
        runtime: Runtime,
        spec: EnvironmentSpec,
        owner: str | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> Self:
        """A fresh sandbox of ``spec`` per start, destroyed on stop."""

        async def acquire() -> Sandbox:
            return await runtime.create(spec, owner=owner)

        async def release(sandbox: Sandbox) -> None:
            await sandbox.destroy()

        return cls(acquire, release, loop=loop)

    @classmethod
    def on_pool(
        cls,
        pool: SandboxPool,
        spec: EnvironmentSpec,
        owner: str | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> Self:
        """A sandbox from ``pool`` per start, given back on stop."""

        async def acquire() -> Sandbox:
            return await pool.acquire(spec, owner=owner)

        return cls(acquire, pool.release, loop=loop)

    @classmethod
    def on_sandbox(cls, sandbox: Sandbox, loop: asyncio.AbstractEventLoop | None = None) -> Self:
        """The caller's sandbox; stop ends the sessions and leaves it running."""

        async def acquire() -> Sandbox:
            return sandbox

        return cls(acquire, _keep, loop=loop)

    def add_hook(self, hook: DeploymentHook) -> None:
        self._hooks.add_hook(hook)

    @on_home_loop
    async def is_alive(self, *, timeout: float | None = None) -> IsAliveResponse:
        if self._runtime is None:
            return IsAliveResponse(is_alive=False, message="deployment not started")
        return await self._runtime.is_alive(timeout=timeout)

    @on_home_loop
    async def start(self) -> None:  # type: ignore[override]  # takes no arguments
        if self._runtime is not None:
            return
        self._hooks.on_custom_step("Starting MegaFlow sandbox")
        sandbox = await self._acquire()
        self._sandbox = sandbox
        self._runtime = SandboxRuntime(sandbox, logger=self.logger)

    @on_home_loop
    async def stop(self) -> None:  # type: ignore[override]  # takes no arguments
        """Close the sessions and release the sandbox; a no-op when stopped."""
        runtime, sandbox = self._runtime, self._sandbox
        self._runtime = self._sandbox = None
        if sandbox is None:
            return
        try:
            if runtime is not None:
                await runtime.close()
        finally:
            await self._release(sandbox)

    @property
    def runtime(self) -> SandboxRuntime:
        if self._runtime is None:
            raise DeploymentNotStartedError()  # type: ignore[no-untyped-call]
        return self._runtime

    @property
    def sandbox(self) -> Sandbox:
        if self._sandbox is None:
            raise DeploymentNotStartedError()  # type: ignore[no-untyped-call]
        return self._sandbox

"""Run services of a cluster config in this process, and check a service's health.

``megaflow serve SERVICE`` calls :func:`serve`; ``megaflow up`` starts one
process per service and waits on :func:`check_health` for each.
Available services: ``environment`` (any runtime) and ``scheduler`` (the
control plane with its stores). ``agent`` and ``model`` have contracts in
``proto/`` but no server yet; asking for them raises ``ConfigError``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import grpc

from megaflow.core.errors import ConfigError, NotFound, TransportError
from megaflow.environment.factory import make_runtime
from megaflow.rpc.config import ClusterConfig, Service
from megaflow.rpc.control import LocalControlPlane
from megaflow.rpc.environment_client import GrpcRuntime
from megaflow.rpc.environment_server import EnvironmentServicer
from megaflow.rpc.scheduler_client import GrpcControlPlane
from megaflow.rpc.scheduler_server import SchedulerServicer
from megaflow.rpc.server import RpcServer
from megaflow.scheduler.abstract import TaskExecutor
from megaflow.scheduler.executors import NoopExecutor, SleepExecutor
from megaflow.scheduler.service import Scheduler
from megaflow.storage.factory import Stores

SERVABLE: tuple[Service, ...] = ("scheduler", "environment")
OnReady = Callable[[str, str], None]


def _server(cfg: ClusterConfig, service: Service, token: str) -> RpcServer:
    ep = cfg.endpoint(service)
    return RpcServer(
        token, host=ep.host, port=ep.port, tls=cfg.tls, max_message_bytes=cfg.max_message_bytes
    )


def _executor(cfg: ClusterConfig) -> TaskExecutor:
    return SleepExecutor(0.0) if cfg.scheduler.executor == "sleep" else NoopExecutor()


async def _serve_environment(
    stack: contextlib.AsyncExitStack, cfg: ClusterConfig, token: str
) -> RpcServer:
    runtime = make_runtime(cfg.environment.runtime)
    await runtime.start()
    stack.push_async_callback(runtime.stop)
    servicer = EnvironmentServicer(runtime)
    stack.push_async_callback(servicer.destroy_all)
    server = _server(cfg, "environment", token)
    server.add(servicer.register)
    await server.start()
    stack.push_async_callback(server.stop)
    return server


async def _serve_scheduler(
    stack: contextlib.AsyncExitStack, cfg: ClusterConfig, token: str
) -> RpcServer:
    stores = Stores.from_config(cfg.scheduler.storage)
    await stores.start()
    stack.push_async_callback(stores.stop)
    scheduler = Scheduler(cfg.scheduler.config, stores, _executor(cfg))
    await scheduler.start()
    stack.push_async_callback(scheduler.stop)
    for run in await stores.metadata.list_runs():
        await scheduler.resume(run.id)  # a restarted control plane picks its runs up
    server = _server(cfg, "scheduler", token)
    server.add(SchedulerServicer(LocalControlPlane(scheduler)).register)
    await server.start()
    stack.push_async_callback(server.stop)
    return server


async def serve(
    services: list[Service],
    cfg: ClusterConfig,
    token: str,
    stop: asyncio.Event,
    on_ready: OnReady | None = None,
) -> None:
    """Serve ``services`` until ``stop`` is set; then stop servers, then what they wrap."""
    missing = [s for s in services if s not in SERVABLE]
    if missing:
        raise ConfigError(
            f"no server for {missing} yet; servable services are {list(SERVABLE)}",
            [(s, "not servable") for s in missing],
        )
    async with contextlib.AsyncExitStack() as stack:
        for service in services:
            if service == "environment":
                server = await _serve_environment(stack, cfg, token)
            else:
                server = await _serve_scheduler(stack, cfg, token)
            if on_ready is not None:
                on_ready(service, server.target)
        await stop.wait()


async def check_health(cfg: ClusterConfig, service: Service, token: str, timeout: float) -> None:
    """Return once ``service`` answers an authenticated call; ``TransportError`` after
    ``timeout`` seconds."""
    ep = cfg.endpoint(service)
    deadline = asyncio.get_running_loop().time() + timeout
    last: Exception | None = None
    while asyncio.get_running_loop().time() < deadline:
        try:
            await asyncio.wait_for(_probe(cfg, service, ep.target, token), timeout=5)
            return
        except (TransportError, TimeoutError, grpc.aio.AioRpcError) as exc:
            last = exc
            await asyncio.sleep(0.2)
    raise TransportError(f"{service} service at {ep.target} is not healthy: {last}")


async def _probe(cfg: ClusterConfig, service: Service, target: str, token: str) -> None:
    if service == "environment":
        async with GrpcRuntime(target, token, cfg.tls, cfg.max_message_bytes) as rt:
            await rt.list()
        return
    async with GrpcControlPlane(target, token, cfg.tls, cfg.max_message_bytes) as cp:
        with contextlib.suppress(NotFound):
            await cp.list_runs()

"""Run services of a cluster config in this process, and check a service's health.

``megaflow serve SERVICE`` calls :func:`serve`; ``megaflow up`` starts one
process per service and waits on :func:`check_health` for each.
Services: ``environment`` (any runtime), ``model`` (the OpenAI-compatible
gateway over HTTP behind the bearer token, and model control over gRPC),
``agent`` (a task executor) and ``scheduler`` (the control plane with its
stores; its attempts run in the agent service with ``executor: agent``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import grpc
from prometheus_client import CollectorRegistry

from megaflow.core.errors import ConfigError, TransportError
from megaflow.environment.factory import make_runtime
from megaflow.monitoring.environment import EnvironmentMetrics
from megaflow.monitoring.scheduler import SchedulerMetrics
from megaflow.rpc.agent_service import AgentServicer, GrpcTaskExecutor
from megaflow.rpc.auth import BearerAuthMiddleware
from megaflow.rpc.config import ClusterConfig, Service
from megaflow.rpc.control import LocalControlPlane
from megaflow.rpc.environment_server import EnvironmentServicer
from megaflow.rpc.metrics_http import ModelServiceCollector, serve_asgi, serve_metrics
from megaflow.rpc.model_control import LocalModelControl, ModelControlServicer
from megaflow.rpc.scheduler_server import SchedulerServicer
from megaflow.rpc.server import RpcServer, check_once, open_channel
from megaflow.rpc.status import error_from
from megaflow.scheduler.abstract import TaskExecutor
from megaflow.scheduler.executors import NoopExecutor, SleepExecutor
from megaflow.scheduler.service import Scheduler
from megaflow.storage.factory import Stores

SERVABLE: tuple[Service, ...] = ("environment", "model", "agent", "scheduler")
OnReady = Callable[[str, str], None]
MakeExecutor = Callable[[ClusterConfig, str, CollectorRegistry], TaskExecutor]
"""Builds the agent service's executor from the cluster config, token and the
registry its metrics go to (the app's)."""


def _server(cfg: ClusterConfig, service: Service, token: str) -> RpcServer:
    ep = cfg.endpoint(service)
    return RpcServer(
        token, host=ep.listen, port=ep.port, tls=cfg.tls,
        max_message_bytes=cfg.max_message_bytes, keepalive_s=cfg.keepalive_s,
    )  # fmt: skip


def _local_executor(kind: str) -> TaskExecutor:
    return SleepExecutor(0.0) if kind == "sleep" else NoopExecutor()


def _scheduler_executor(cfg: ClusterConfig, token: str) -> TaskExecutor:
    if cfg.scheduler.executor == "agent":
        return GrpcTaskExecutor(
            cfg.agent.target, token, cfg.tls, cfg.max_message_bytes, cfg.keepalive_s
        )
    return _local_executor(cfg.scheduler.executor)


async def _serve_environment(
    stack: contextlib.AsyncExitStack, cfg: ClusterConfig, token: str, reg: CollectorRegistry
) -> RpcServer:
    runtime = make_runtime(cfg.environment.runtime, metrics=EnvironmentMetrics(reg))
    await runtime.start()
    stack.push_async_callback(runtime.stop)
    servicer = EnvironmentServicer(runtime)
    stack.push_async_callback(servicer.destroy_all)
    server = _server(cfg, "environment", token)
    server.add(servicer.register, "environment")
    await server.start()
    stack.push_async_callback(server.stop)
    return server


async def _serve_scheduler(
    stack: contextlib.AsyncExitStack, cfg: ClusterConfig, token: str, reg: CollectorRegistry
) -> RpcServer:
    stores = Stores.from_config(cfg.scheduler.storage)
    await stores.start()
    stack.push_async_callback(stores.stop)
    scheduler = Scheduler(
        cfg.scheduler.config, stores, _scheduler_executor(cfg, token),
        metrics=SchedulerMetrics(reg),
    )  # fmt: skip
    await scheduler.start()
    stack.push_async_callback(scheduler.stop)
    for run in await stores.metadata.list_runs():
        await scheduler.resume(run.id)  # a restarted control plane picks its runs up
    server = _server(cfg, "scheduler", token)
    server.add(SchedulerServicer(LocalControlPlane(scheduler)).register, "scheduler")
    await server.start()
    stack.push_async_callback(server.stop)
    return server


async def _serve_agent(
    stack: contextlib.AsyncExitStack,
    cfg: ClusterConfig,
    token: str,
    reg: CollectorRegistry,
    make: MakeExecutor | None,
) -> RpcServer:
    if cfg.agent.executor == "app":
        if make is None:
            raise ConfigError("agent.executor 'app' needs the app layer; serve it from the CLI")
        executor = make(cfg, token, reg)
    else:
        executor = _local_executor(cfg.agent.executor)
    await executor.start()
    stack.push_async_callback(executor.stop)
    server = _server(cfg, "agent", token)
    server.add(AgentServicer(executor).register, "agent")
    await server.start()
    stack.push_async_callback(server.stop)
    return server


async def _serve_model(
    stack: contextlib.AsyncExitStack, cfg: ClusterConfig, token: str, reg: CollectorRegistry
) -> RpcServer:
    from megaflow.model.factory import make_model_service
    from megaflow.model.gateway import create_app

    service = make_model_service(cfg.model.config)
    await service.start()
    stack.push_async_callback(service.stop)
    reg.register(
        ModelServiceCollector(
            lambda: service.calls_total, lambda: service.errors_total,
            lambda: service.router.outstanding,
        )
    )  # fmt: skip
    app = BearerAuthMiddleware(create_app(service), token)
    await serve_asgi(stack, app, cfg.model.listen, cfg.model.http_port, cfg.tls, "model gateway")
    server = _server(cfg, "model", token)
    server.add(ModelControlServicer(LocalModelControl(service.router)).register, "model")
    await server.start()
    stack.push_async_callback(server.stop)
    return server


async def serve(
    services: list[Service],
    cfg: ClusterConfig,
    token: str,
    stop: asyncio.Event,
    on_ready: OnReady | None = None,
    agent_executor: MakeExecutor | None = None,
) -> None:
    """Serve ``services`` until ``stop`` is set; then stop servers, then what they wrap.
    Services with a ``metrics_port`` also serve this process's metrics there."""
    registry = CollectorRegistry()
    async with contextlib.AsyncExitStack() as stack:
        for service in services:
            if service == "agent":
                server = await _serve_agent(stack, cfg, token, registry, agent_executor)
            else:
                start = {
                    "environment": _serve_environment,
                    "scheduler": _serve_scheduler,
                    "model": _serve_model,
                }[service]
                server = await start(stack, cfg, token, registry)
            ep = cfg.endpoint(service)
            if ep.metrics_port is not None:
                await serve_metrics(stack, registry, ep.listen, ep.metrics_port, token, cfg.tls)
            if on_ready is not None:
                on_ready(service, server.target)
        await stop.wait()


async def check_health(cfg: ClusterConfig, service: Service, token: str, timeout: float) -> None:
    """Return once ``service`` answers an authenticated Health call naming it;
    ``TransportError`` after ``timeout`` seconds."""
    ep = cfg.endpoint(service)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: object = None
    async with open_channel(ep.target, cfg.tls, cfg.max_message_bytes) as channel:
        while loop.time() < deadline:
            try:
                services = await check_once(channel, token)
            except grpc.aio.AioRpcError as err:
                if err.code() == grpc.StatusCode.UNAUTHENTICATED:
                    raise error_from(err, f"{service} service at {ep.target}") from None
                last = err.details()
            else:
                if service in services:
                    return
                last = f"it serves {services}, not {service}"
            await asyncio.sleep(0.2)
    raise TransportError(f"{service} service at {ep.target} is not healthy: {last}")

"""Run services of a cluster config in this process.

``megaflow serve SERVICE`` calls :func:`serve`; ``megaflow up``
(:mod:`megaflow.app.launcher`) starts one process per service and waits on
:func:`~megaflow.rpc.health.check_health` for each.
Services: ``environment`` (any runtime), ``model`` (the OpenAI-compatible
gateway over HTTP behind the bearer token, and model control over gRPC),
``agent`` (a task executor: the app's, :class:`~megaflow.app.agent_runs.ClusterAgentExecutor`,
with ``executor: app``) and ``scheduler`` (the control plane with its
stores; its attempts run in the agent service with ``executor: agent``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable

from prometheus_client import CollectorRegistry

from megaflow.app.agent_runs import ClusterAgentExecutor
from megaflow.environment.factory import make_runtime
from megaflow.monitoring.environment import EnvironmentMetrics
from megaflow.monitoring.model import ModelFleetCollector
from megaflow.monitoring.scheduler import SchedulerMetrics
from megaflow.rpc.agent_service import AgentServicer, GrpcTaskExecutor
from megaflow.rpc.auth import BearerAuthMiddleware, check_bearer
from megaflow.rpc.config import ClusterConfig, Service
from megaflow.rpc.environment_server import EnvironmentServicer
from megaflow.rpc.metrics_http import ModelServiceCollector, serve_asgi, serve_metrics
from megaflow.rpc.model_server import ModelControlServicer
from megaflow.rpc.scheduler_server import SchedulerServicer
from megaflow.rpc.server import RpcServer
from megaflow.scheduler.abstract import TaskExecutor
from megaflow.scheduler.control import LocalControlPlane
from megaflow.scheduler.service import Scheduler
from megaflow.scheduler.synthetic import NoopExecutor, SleepExecutor
from megaflow.storage.factory import Stores
from megaflow.storage.lease import SCHEDULER_LEASE, DriverLease

OnReady = Callable[[str, str], None]


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
    # the driver of every submitted run: status, top and the dashboard read it (one
    # scheduler service per store; a second is refused here, before it drives anything)
    ttl = cfg.scheduler.storage.outage.lease_ttl_s
    lease = DriverLease(stores.metadata, SCHEDULER_LEASE, ttl, end_in_place=True)
    await lease.start()
    stack.push_async_callback(lease.stop)
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
) -> RpcServer:
    executor: TaskExecutor
    if cfg.agent.executor == "app":
        executor = ClusterAgentExecutor.from_cluster(cfg, token, reg)
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
    reg.register(ModelFleetCollector(service.router.health))  # replicas, versions, probes
    authorize = functools.partial(check_bearer, token=token)
    app = BearerAuthMiddleware(create_app(service, authorize=authorize), token)
    await serve_asgi(stack, app, cfg.model.listen, cfg.model.http_port, cfg.tls, "model gateway")
    server = _server(cfg, "model", token)
    server.add(ModelControlServicer(service.control).register, "model")
    await server.start()
    stack.push_async_callback(server.stop)
    return server


async def serve(
    services: list[Service],
    cfg: ClusterConfig,
    token: str,
    stop: asyncio.Event,
    on_ready: OnReady | None = None,
    registry: CollectorRegistry | None = None,
) -> None:
    """Serve ``services`` until ``stop`` is set; then stop servers, then what they wrap.
    Their metrics go to ``registry`` (a new one if None); services with a ``metrics_port``
    also serve this process's metrics there."""
    registry = registry if registry is not None else CollectorRegistry()
    async with contextlib.AsyncExitStack() as stack:
        for service in services:
            start = {
                "environment": _serve_environment,
                "scheduler": _serve_scheduler,
                "model": _serve_model,
                "agent": _serve_agent,
            }[service]
            server = await start(stack, cfg, token, registry)
            ep = cfg.endpoint(service)
            if ep.metrics_port is not None:
                await serve_metrics(stack, registry, ep.listen, ep.metrics_port, token, cfg.tls)
            if on_ready is not None:
                on_ready(service, server.target)
        await stop.wait()

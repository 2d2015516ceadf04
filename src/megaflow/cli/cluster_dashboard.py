"""The dashboard served by the control plane: ``megaflow serve`` with a ``dashboard`` entry.

When the process serves the scheduler and the cluster config has a
``dashboard`` section, :func:`serve_cluster` runs the dashboard beside the
services, over the scheduler's configured stores and behind the cluster
token (the login page takes it; the printed one-time link signs a browser
in). Its live pages read this process's own metrics registry (the
scheduler's figures, and the sandboxes' when the environment runs here too)
and the ``metrics_port`` of each service that runs elsewhere. The wiring sits
in the CLI because the app and the dashboard are independent layers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from megaflow.app.serve import OnReady
from megaflow.app.serve import serve as serve_services
from megaflow.core.errors import ConfigError
from megaflow.dashboard.live import LiveMetrics, MetricsSource
from megaflow.rpc.config import SERVABLE, ClusterConfig, DashboardEndpoint, Service
from megaflow.storage.config import MemoryMetadataConfig

OnDashboard = Callable[[str], None]


def metrics_sources(
    cfg: ClusterConfig, here: list[Service], token: str, registry: CollectorRegistry
) -> list[MetricsSource]:
    """This process's registry, then the metrics endpoint of every service served elsewhere."""
    sources = [MetricsSource(name="this process", registry=registry)]
    scheme = "https" if cfg.tls else "http"
    verify: str | bool = (cfg.tls.ca_file or True) if cfg.tls else True
    for name in SERVABLE:
        ep = cfg.endpoint(name)
        if name not in here and ep.metrics_port is not None:
            url = f"{scheme}://{ep.host}:{ep.metrics_port}/metrics"
            sources.append(MetricsSource(name=name, url=url, token=token, verify=verify))
    return sources


async def serve_cluster(
    services: list[Service],
    cfg: ClusterConfig,
    token: str,
    stop: asyncio.Event,
    on_ready: OnReady | None = None,
    on_dashboard: OnDashboard | None = None,
) -> None:
    """Serve ``services`` (and the dashboard, if configured and the scheduler is among them)
    until ``stop`` is set. ``on_dashboard`` gets the dashboard's one-time sign-in link."""
    dash = cfg.dashboard
    if dash is None or "scheduler" not in services:
        await serve_services(services, cfg, token, stop, on_ready)
        return
    if isinstance(cfg.scheduler.storage.metadata, MemoryMetadataConfig):
        raise ConfigError(
            "dashboard: scheduler.storage.metadata is type memory, which the dashboard cannot "
            "read; use sqlite, postgres or mongo, or remove the dashboard section"
        )
    registry = CollectorRegistry()
    task = asyncio.ensure_future(
        _or_stop(_dashboard(dash, cfg, services, token, registry, stop, on_dashboard), stop)
    )
    try:
        await serve_services(services, cfg, token, stop, on_ready, registry=registry)
    finally:
        stop.set()
        await task


async def _dashboard(
    dash: DashboardEndpoint,
    cfg: ClusterConfig,
    services: list[Service],
    token: str,
    registry: CollectorRegistry,
    stop: asyncio.Event,
    on_dashboard: OnDashboard | None,
) -> None:
    from megaflow.dashboard.auth import DashboardAuth
    from megaflow.dashboard.server import serve
    from megaflow.storage.factory import make_artifact_store, make_metadata_store

    storage = cfg.scheduler.storage
    auth = DashboardAuth(token)
    scheme = "https" if cfg.tls else "http"

    def ready(port: int) -> None:
        if on_dashboard is not None:
            on_dashboard(f"{scheme}://{dash.host}:{port}/login?code={auth.new_code()}")

    tls = None
    if cfg.tls is not None and cfg.tls.cert_file and cfg.tls.key_file:
        tls = (cfg.tls.cert_file, cfg.tls.key_file)
    await serve(
        make_metadata_store(storage.metadata), make_artifact_store(storage.artifacts), auth,
        host=dash.listen, port=dash.port, interval=dash.interval_s, tls=tls, stop=stop,
        live=LiveMetrics(metrics_sources(cfg, services, token, registry)),
        train_dir=Path(dash.train_dir), on_ready=ready,
    )  # fmt: skip


async def _or_stop(coro: Coroutine[Any, Any, None], stop: asyncio.Event) -> None:
    """Run ``coro``; if it fails, stop the services too (they were asked for with it)."""
    try:
        await coro
    except BaseException:
        stop.set()
        raise

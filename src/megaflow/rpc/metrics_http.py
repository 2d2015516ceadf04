"""``/metrics`` of a served service: its registry over HTTP, behind the bearer token.

Prometheus scrapes it with the cluster's token (``authorization:
{credentials_file: .megaflow/cluster/token}`` in its scrape config).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, make_asgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from megaflow.core.errors import TransportError
from megaflow.rpc.auth import BearerAuthMiddleware
from megaflow.rpc.config import TlsConfig


class ModelServiceCollector(Collector):
    """The model service's own counters, read when scraped."""

    def __init__(
        self, calls: Callable[[], int], errors: Callable[[], int], outstanding: Callable[[], int]
    ) -> None:
        self.calls, self.errors, self.outstanding = calls, errors, outstanding

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        yield CounterMetricFamily(
            "megaflow_model_calls", "Model calls served by the gateway.", value=self.calls()
        )
        yield CounterMetricFamily(
            "megaflow_model_errors", "Model calls that ended in an error.", value=self.errors()
        )
        yield GaugeMetricFamily(
            "megaflow_model_outstanding_requests",
            "Requests in flight to the backends.",
            value=self.outstanding(),
        )


async def serve_asgi(
    stack: contextlib.AsyncExitStack,
    app: Any,
    host: str,
    port: int,
    tls: TlsConfig | None,
    what: str,
) -> None:
    """Serve an ASGI ``app`` with uvicorn (TLS if given) until ``stack`` closes."""
    import uvicorn

    cfg = uvicorn.Config(
        app, host=host, port=port, log_level="warning", lifespan="off", access_log=False,
        ssl_certfile=tls.cert_file if tls else None, ssl_keyfile=tls.key_file if tls else None,
    )  # fmt: skip
    server = uvicorn.Server(cfg)
    task = asyncio.create_task(server.serve())

    async def stop() -> None:
        server.should_exit = True
        await task

    stack.push_async_callback(stop)
    while not server.started:
        if task.done():
            task.result()
            raise TransportError(f"{what} on {host}:{port} stopped at start")
        await asyncio.sleep(0.01)


async def serve_metrics(
    stack: contextlib.AsyncExitStack,
    registry: CollectorRegistry,
    host: str,
    port: int,
    token: str,
    tls: TlsConfig | None,
) -> None:
    """Serve ``registry`` behind the bearer token until ``stack`` closes."""
    app = BearerAuthMiddleware(make_asgi_app(registry), token)
    await serve_asgi(stack, app, host, port, tls, "metrics endpoint")

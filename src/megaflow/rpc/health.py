"""Waiting for a service of a cluster config to answer its authenticated health check."""

from __future__ import annotations

import asyncio

import grpc

from megaflow.core.errors import TransportError
from megaflow.rpc.config import ClusterConfig, Service
from megaflow.rpc.server import check_once, open_channel
from megaflow.rpc.status import error_from


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

"""A gRPC server with MegaFlow's guards, and the client channel that matches it.

:class:`RpcServer` hosts one or more services behind the bearer-token
interceptor, with message size limits and optional TLS::

    server = RpcServer(token, host="127.0.0.1", port=0)
    server.add(EnvironmentServicer(runtime).register)
    port = await server.start()
    ...
    await server.stop()

:func:`open_channel` makes the client side with the same limits and TLS;
clients pass :func:`call_metadata` on every call.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import grpc

from megaflow.core.errors import ConfigError, TransportError
from megaflow.rpc.auth import AUTH_HEADER, BearerAuthInterceptor, bearer_value
from megaflow.rpc.config import TlsConfig
from megaflow.rpc.gen import common_pb2, common_pb2_grpc

DEFAULT_MAX_MESSAGE = 16 * 1024 * 1024
DEFAULT_KEEPALIVE_S = 20.0
Metadata = tuple[tuple[str, str], ...]


def channel_options(max_message_bytes: int) -> list[tuple[str, Any]]:
    return [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
    ]


def client_keepalive(keepalive_s: float) -> list[tuple[str, Any]]:
    """Ping an idle connection every ``keepalive_s``; a peer silent for as long again
    (a frozen process, a dead link) fails the calls on it with UNAVAILABLE."""
    ms = max(1, int(keepalive_s * 1000))
    return [
        ("grpc.keepalive_time_ms", ms),
        ("grpc.keepalive_timeout_ms", ms),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.http2.min_sent_ping_interval_without_data_ms", ms),
        ("grpc.http2.ping_timeout_ms", ms),
    ]


def server_keepalive(keepalive_s: float) -> list[tuple[str, Any]]:
    """Accept the clients' pings, even during a long silent call (a slow exec, a
    WaitRun): without this the server answers them with GOAWAY ``too_many_pings``."""
    return [
        ("grpc.http2.min_recv_ping_interval_without_data_ms", max(1, int(keepalive_s * 500))),
        ("grpc.http2.max_ping_strikes", 0),
    ]


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read TLS {what} {path}: {exc}") from exc


def call_metadata(token: str) -> Metadata:
    """The metadata every client call carries."""
    return ((AUTH_HEADER, bearer_value(token)),)


class _Health:
    def __init__(self) -> None:
        self.services: list[str] = []

    async def Check(self, request: common_pb2.Empty, context: Any) -> common_pb2.HealthReply:
        return common_pb2.HealthReply(services=self.services)


async def check_once(channel: grpc.aio.Channel, token: str, timeout: float = 5.0) -> list[str]:
    """The services a server hosts, asked through its Health service."""
    stub = common_pb2_grpc.HealthStub(channel)  # type: ignore[no-untyped-call]
    reply = await stub.Check(common_pb2.Empty(), metadata=call_metadata(token), timeout=timeout)
    return list(reply.services)


class RpcServer:
    """One ``grpc.aio`` server: auth interceptor, size limits, optional TLS."""

    def __init__(
        self,
        token: str,
        host: str = "127.0.0.1",
        port: int = 0,
        tls: TlsConfig | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE,
        keepalive_s: float = DEFAULT_KEEPALIVE_S,
    ) -> None:
        self.host, self.port, self.tls = host, port, tls
        self._server = grpc.aio.server(
            interceptors=[BearerAuthInterceptor(token)],
            # No SO_REUSEPORT: a second server on a port in use must fail, not share it.
            options=[
                *channel_options(max_message_bytes),
                *server_keepalive(keepalive_s),
                ("grpc.so_reuseport", 0),
            ],
        )
        self._health = _Health()
        common_pb2_grpc.add_HealthServicer_to_server(self._health, self._server)  # type: ignore[no-untyped-call]

    def add(self, register: Callable[[grpc.aio.Server], None], name: str = "") -> None:
        """Add a service: ``register`` is a servicer's ``register`` method; ``name``
        is what the Health service reports."""
        register(self._server)
        if name:
            self._health.services.append(name)

    @property
    def target(self) -> str:
        return f"{self.host}:{self.port}"

    async def start(self) -> int:
        """Bind and start serving; returns the bound port (useful with port 0)."""
        address = f"{self.host}:{self.port}"
        try:
            if self.tls is None:
                bound = self._server.add_insecure_port(address)
            else:
                if not (self.tls.cert_file and self.tls.key_file):
                    raise ConfigError("a TLS server needs tls.cert_file and tls.key_file")
                creds = grpc.ssl_server_credentials(
                    [(_read(self.tls.key_file, "key"), _read(self.tls.cert_file, "certificate"))]
                )
                bound = self._server.add_secure_port(address, creds)
        except RuntimeError as exc:  # grpc raises it when it cannot bind
            raise TransportError(
                f"cannot listen on {address}: {exc}; is the port in use?"
            ) from None
        bound = int(bound)
        if not bound:
            raise TransportError(f"cannot listen on {address}; is the port in use?")
        self.port = bound
        await self._server.start()
        return bound

    async def wait(self) -> None:
        """Serve until stopped."""
        await self._server.wait_for_termination()

    async def stop(self, grace: float | None = 1.0) -> None:
        await self._server.stop(grace)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


def open_channel(
    target: str,
    tls: TlsConfig | None = None,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE,
    keepalive_s: float = DEFAULT_KEEPALIVE_S,
) -> grpc.aio.Channel:
    """A client channel to ``target`` (``host:port``) with the server's limits.

    With ``tls``, the server is verified against ``tls.ca_file`` (the system
    roots when it is None).
    """
    options = channel_options(max_message_bytes) + client_keepalive(keepalive_s)
    if tls is None:
        return grpc.aio.insecure_channel(target, options=options)
    root = _read(tls.ca_file, "CA") if tls.ca_file else None
    if tls.server_name:
        options.append(("grpc.ssl_target_name_override", tls.server_name))
    creds = grpc.ssl_channel_credentials(root_certificates=root)
    return grpc.aio.secure_channel(target, creds, options=options)

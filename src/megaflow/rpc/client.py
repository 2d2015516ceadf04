"""What every gRPC client of a MegaFlow service shares: one channel, the bearer
token on every call, and gRPC errors raised again as MegaFlow errors.

A client subclasses :class:`GrpcClient`, names its service and builds its stub;
the channel opens on first use (or on ``start``) and closes on ``stop``::

    class GrpcThing(GrpcClient, Thing):
        service = "thing service"

        def new_stub(self, channel: grpc.aio.Channel) -> Any:
            return thing_pb2_grpc.ThingStub(channel)

        async def poke(self) -> None:
            await self.call("Poke", lambda s, md: s.Poke(req, metadata=md))
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, TypeVar

import grpc

from megaflow.core.lifecycle import Lifecycle
from megaflow.rpc.config import TlsConfig
from megaflow.rpc.server import (
    DEFAULT_KEEPALIVE_S,
    DEFAULT_MAX_MESSAGE,
    Metadata,
    call_metadata,
    open_channel,
)
from megaflow.rpc.status import error_from

T = TypeVar("T")


class GrpcClient(Lifecycle):
    """A lazily opened channel to ``target`` and the stub of one service on it."""

    service: ClassVar[str] = "service"
    """How errors name the service (``"environment service"``)."""

    def __init__(
        self,
        target: str,
        token: str,
        tls: TlsConfig | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE,
        keepalive_s: float = DEFAULT_KEEPALIVE_S,
    ) -> None:
        self.target = target
        self.tls = tls
        self.max_message_bytes = max_message_bytes
        self.keepalive_s = keepalive_s
        self._md: Metadata = call_metadata(token)
        self._channel: grpc.aio.Channel | None = None
        self._stub: Any = None

    def new_stub(self, channel: grpc.aio.Channel) -> Any:
        raise NotImplementedError

    async def start(self) -> None:
        if self._channel is None:
            self._channel = open_channel(
                self.target, self.tls, self.max_message_bytes, self.keepalive_s
            )
            self._stub = self.new_stub(self._channel)

    async def stop(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = None

    async def close(self) -> None:
        await self.stop()

    def error(self, err: grpc.aio.AioRpcError, what: str) -> Exception:
        """The MegaFlow error a failed call ``what`` stands for."""
        return error_from(err, self.describe(what))

    def describe(self, what: str) -> str:
        return f"{self.service} {self.target} {what}"

    async def stub(self) -> Any:
        """The stub, the channel opened if needed (for streaming calls)."""
        await self.start()
        return self._stub

    async def call(self, what: str, fn: Callable[[Any, Metadata], Awaitable[T]]) -> T:
        """Run ``fn(stub, metadata)``; gRPC errors become MegaFlow errors."""
        await self.start()
        try:
            return await fn(self._stub, self._md)
        except grpc.aio.AioRpcError as err:
            raise self.error(err, what) from None

"""An ASGI middleware refusing request bodies over a size cap with HTTP 413.

A request that declares a ``Content-Length`` over the cap is answered at once,
before any of its body is read. A request without one (chunked transfer) is
read piece by piece, counting as it goes; the moment the count passes the cap
it is answered with 413 and the rest is never read. At most ``max_bytes`` of a
body is held in memory.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

DEFAULT_MAX_BODY_MB = 16
_MIB = 1024 * 1024


async def _refuse(send: Send, status: int, message: str) -> None:
    body = json.dumps(
        {"error": {"message": message, "type": "invalid_request_error", "code": status}}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BodyLimitMiddleware:
    """Answers 413 to any HTTP request whose body is over ``max_bytes``."""

    def __init__(self, app: ASGIApp, max_bytes: int = DEFAULT_MAX_BODY_MB * _MIB) -> None:
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be at least 1, got {max_bytes}")
        self.app = app
        self.max_bytes = max_bytes

    def _too_large(self, size: str) -> str:
        return f"request body is {size}; the gateway accepts at most {self.max_bytes} bytes"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = [v for k, v in scope.get("headers", []) if k.lower() == b"content-length"]
        if declared:
            try:
                length = int(declared[0])
            except ValueError:
                await _refuse(send, 400, "Content-Length is not a number")
                return
            if length > self.max_bytes:
                await _refuse(send, 413, self._too_large(f"{length} bytes"))
                return
            await self.app(scope, receive, send)  # the server reads no more than declared
            return
        # No declared length: read and count before the app sees any of it.
        chunks: list[bytes] = []
        total = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before sending all of it
            chunk = message.get("body", b"")
            total += len(chunk)
            if total > self.max_bytes:
                await _refuse(send, 413, self._too_large(f"over {self.max_bytes} bytes"))
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        await self.app(scope, replay, send)

"""Bearer tokens: generation, storage with 0600 permissions, and the check.

Every gRPC call carries ``authorization: Bearer <token>`` in its metadata;
:class:`BearerAuthInterceptor` checks it before any handler runs, so a call
with a missing or wrong token gets ``UNAUTHENTICATED`` and does nothing.
:func:`check_bearer` is the same check for HTTP endpoints, and
:class:`BearerAuthMiddleware` applies it to any ASGI app (the model gateway
in ``megaflow serve model``): 401 and nothing done.
Comparison is constant-time (:func:`hmac.compare_digest`).
"""

from __future__ import annotations

import hmac
import os
import secrets
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc

from megaflow.core.errors import ConfigError
from megaflow.storage.private import private_dir

AUTH_HEADER = "authorization"
SCHEME = "Bearer"
MIN_TOKEN_CHARS = 16


def generate_token() -> str:
    """A fresh random token (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def write_token(path: Path, token: str) -> None:
    """Store ``token`` at ``path``, readable and writable by the owner only (0600).

    The file is created with mode 0600 (never briefly wider), and an existing
    file is tightened to 0600 before it is overwritten.
    """
    _check_token(token, str(path))
    private_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, (token + "\n").encode())
    finally:
        os.close(fd)


def read_token(path: Path) -> str:
    """Read a token file. Raises ``ConfigError`` if it is missing, empty, or
    readable by group or others (fix with ``chmod 600``)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise ConfigError(f"no token file at {path}; run `megaflow up` or set auth.token") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(
            f"token file {path} is accessible by group or others "
            f"(mode {stat.S_IMODE(mode):o}); run `chmod 600 {path}`"
        )
    token = path.read_text().strip()
    _check_token(token, str(path))
    return token


def token_from_env(name: str) -> str:
    """The token in environment variable ``name`` (a Kubernetes Secret passed as an
    env var). Raises ``ConfigError`` if it is unset, short or has whitespace."""
    token = os.environ.get(name, "").strip()
    if not token:
        raise ConfigError(f"auth.token_env names ${name}, which is not set or empty")
    _check_token(token, f"${name}")
    return token


def load_or_create_token(path: Path) -> str:
    """The token stored at ``path``; a new one is generated and stored if there is none."""
    if path.exists():
        return read_token(path)
    token = generate_token()
    write_token(path, token)
    return token


def _check_token(token: str, where: str) -> None:
    if len(token) < MIN_TOKEN_CHARS or any(c.isspace() for c in token):
        raise ConfigError(
            f"the token from {where} must be at least {MIN_TOKEN_CHARS} characters "
            "without whitespace; generate one with `megaflow up` or secrets.token_urlsafe()"
        )


def bearer_value(token: str) -> str:
    """The ``authorization`` header value for ``token``."""
    return f"{SCHEME} {token}"


def check_bearer(header: str | None, token: str) -> bool:
    """True if ``header`` (an ``Authorization`` value) carries ``token``. Constant-time."""
    expected = bearer_value(token).encode()
    given = (header or "").strip().encode()
    # compare_digest takes time by the length of its inputs, not by where they differ.
    return hmac.compare_digest(given, expected)


def metadata_value(metadata: Any, key: str = AUTH_HEADER) -> str | None:
    """The first value of ``key`` in gRPC metadata (a sequence of pairs)."""
    for k, v in metadata or ():
        if k == key:
            return v.decode() if isinstance(v, bytes) else str(v)
    return None


def _deny(kind: str) -> Any:
    async def abort_unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")

    async def abort_stream(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")
        yield  # pragma: no cover - makes this an async generator

    builders: dict[str, Callable[..., Any]] = {
        "unary_unary": lambda: grpc.unary_unary_rpc_method_handler(abort_unary),
        "unary_stream": lambda: grpc.unary_stream_rpc_method_handler(abort_stream),
        "stream_unary": lambda: grpc.stream_unary_rpc_method_handler(abort_unary),
        "stream_stream": lambda: grpc.stream_stream_rpc_method_handler(abort_stream),
    }
    return builders[kind]()


def _kind(handler: Any) -> str:
    req = "stream" if handler.request_streaming else "unary"
    resp = "stream" if handler.response_streaming else "unary"
    return f"{req}_{resp}"


class BearerAuthInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Rejects every call whose metadata lacks ``authorization: Bearer <token>``.

    The rejecting handler never calls the service, so nothing is done. The
    request body of a rejected call is not even deserialized.
    """

    def __init__(self, token: str) -> None:
        _check_token(token, "the server config")
        self._token = token

    async def intercept_service(
        self,
        continuation: Callable[[Any], Awaitable[Any]],
        handler_call_details: Any,
    ) -> Any:
        handler = await continuation(handler_call_details)
        header = metadata_value(handler_call_details.invocation_metadata)
        if check_bearer(header, self._token) or handler is None:
            return handler
        return _deny(_kind(handler))


class BearerAuthMiddleware:
    """ASGI middleware: HTTP requests without ``Authorization: Bearer <token>`` get 401
    and never reach the wrapped app (the model gateway, a metrics endpoint ...)."""

    def __init__(self, app: Any, token: str) -> None:
        _check_token(token, "the server config")
        self.app = app
        self._token = token

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or ())
        header = headers.get(b"authorization", b"").decode("latin-1")
        if check_bearer(header, self._token):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        body = b'{"error": {"message": "missing or wrong bearer token", "type": "unauthorized"}}'
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"www-authenticate", b"Bearer"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

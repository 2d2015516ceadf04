"""MegaFlow errors across the wire, both ways.

A server handler that raises a :class:`MegaFlowError` aborts the call with
the matching status code, the error's message as details, and the error's
class name in the ``megaflow-error`` trailer; the client raises the same
class again, so a caller cannot tell an in-process call from a gRPC one.
Builtin exceptions (``KeyError`` ...) come back as themselves too; other
unexpected exceptions as ``RuntimeError`` naming their class (so a bug is
never mistaken for a retryable infrastructure failure). Errors without a
trailer (transport failures, message size limits, auth) are mapped from the
status code.
"""

from __future__ import annotations

import builtins
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NoReturn, TypeVar

import grpc
from pydantic import ValidationError

from megaflow.core import errors as E

log = logging.getLogger(__name__)

ERROR_TRAILER = "megaflow-error"

_TO_CODE: list[tuple[type[BaseException], grpc.StatusCode]] = [
    (E.AuthError, grpc.StatusCode.UNAUTHENTICATED),
    (E.NotFound, grpc.StatusCode.NOT_FOUND),
    (E.AlreadyExists, grpc.StatusCode.ALREADY_EXISTS),
    (E.InvalidTransition, grpc.StatusCode.FAILED_PRECONDITION),
    (E.InvalidInput, grpc.StatusCode.INVALID_ARGUMENT),
    (E.ConfigError, grpc.StatusCode.INVALID_ARGUMENT),
    (E.Backpressure, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (E.TransportError, grpc.StatusCode.UNAVAILABLE),
    (E.MegaFlowTimeout, grpc.StatusCode.DEADLINE_EXCEEDED),
    (E.Cancelled, grpc.StatusCode.CANCELLED),
    (E.InfraError, grpc.StatusCode.UNAVAILABLE),
    (E.MegaFlowError, grpc.StatusCode.INTERNAL),
]

_FROM_CODE: dict[grpc.StatusCode, type[E.MegaFlowError]] = {
    grpc.StatusCode.UNAUTHENTICATED: E.AuthError,
    grpc.StatusCode.PERMISSION_DENIED: E.AuthError,
    grpc.StatusCode.NOT_FOUND: E.NotFound,
    grpc.StatusCode.ALREADY_EXISTS: E.AlreadyExists,
    grpc.StatusCode.INVALID_ARGUMENT: E.InvalidInput,
    grpc.StatusCode.FAILED_PRECONDITION: E.InvalidInput,
    grpc.StatusCode.OUT_OF_RANGE: E.InvalidInput,
    grpc.StatusCode.RESOURCE_EXHAUSTED: E.Backpressure,
    grpc.StatusCode.UNAVAILABLE: E.TransportError,
    grpc.StatusCode.DEADLINE_EXCEEDED: E.MegaFlowTimeout,
    grpc.StatusCode.CANCELLED: E.Cancelled,
}


def code_for(exc: BaseException) -> grpc.StatusCode:
    """The status code a server answers ``exc`` with."""
    if isinstance(exc, ValidationError | ValueError) and not isinstance(exc, E.MegaFlowError):
        return grpc.StatusCode.INVALID_ARGUMENT
    for cls, code in _TO_CODE:
        if isinstance(exc, cls):
            return code
    return grpc.StatusCode.INTERNAL


async def abort_with(context: grpc.aio.ServicerContext, exc: BaseException) -> NoReturn:
    """Abort the call with the code, message and class name of ``exc``."""
    if not isinstance(exc, E.MegaFlowError | ValidationError | ValueError):
        log.error("handler failed", exc_info=exc)  # a bug or an unexpected failure
    context.set_trailing_metadata(((ERROR_TRAILER, type(exc).__name__),))
    message = str(exc) or type(exc).__name__
    if isinstance(exc, ValidationError):
        problems = [
            f"{'.'.join(map(str, e['loc'])) or e['type']}: {e['msg']}" for e in exc.errors()
        ]
        message = f"invalid {exc.title}: " + "; ".join(problems)
    await context.abort(code_for(exc), message)
    raise AssertionError("unreachable: context.abort raises")  # pragma: no cover


def error_from(err: grpc.aio.AioRpcError, what: str) -> Exception:
    """The error a client raises for a failed call to ``what``: the server's own class
    for MegaFlow errors and builtin exceptions; else one mapped from the status code."""
    details = err.details() or err.code().name
    name = str(dict(err.trailing_metadata() or ()).get(ERROR_TRAILER) or "")
    cls = getattr(E, name, None) or getattr(builtins, name, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        return cls(details)
    if name and err.code() == grpc.StatusCode.INTERNAL:
        # An unexpected failure of another kind: not infrastructure, so not retried.
        return RuntimeError(f"{what}: {name}: {details}")
    fallback = _FROM_CODE.get(err.code(), E.InfraError)
    if fallback is E.TransportError:
        return E.TransportError(f"{what}: service unreachable ({details})")
    if fallback is E.AuthError:
        return E.AuthError(f"{what}: {details}; check the cluster token")
    return fallback(f"{what}: {details}")


T = TypeVar("T")


def handles_errors(
    fn: Callable[..., Awaitable[T]],
) -> Callable[..., Awaitable[T]]:
    """Wrap a unary server handler ``(self, request, context)`` so errors abort cleanly."""

    @functools.wraps(fn)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> T:
        try:
            return await fn(self, request, context)
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            await abort_with(context, exc)

    return wrapper


def streams_errors(
    fn: Callable[..., AsyncIterator[T]],
) -> Callable[..., AsyncIterator[T]]:
    """Like :func:`handles_errors`, for handlers that stream their response."""

    @functools.wraps(fn)
    async def wrapper(
        self: Any, request: Any, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[T]:
        try:
            async for item in fn(self, request, context):
                yield item
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            await abort_with(context, exc)

    return wrapper

"""Connections and key names shared by the Redis queue and event bus.

Every key of one namespace carries the same hash tag, ``{megaflow:<ns>}``,
so Redis Cluster maps all of them to one slot. That is what lets the queue's
Lua scripts touch several keys at once, and it is why the same code runs on
a single server and on a cluster. Different namespaces spread over the
cluster's nodes.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from typing import Any

from megaflow.core.errors import ConfigError, MegaFlowError, StorageError, TransportError

_NAMESPACE = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


def key_prefix(namespace: str) -> str:
    """The hash-tagged prefix of every key of ``namespace``."""
    if not _NAMESPACE.match(namespace):
        raise ConfigError(
            f"redis namespace {namespace!r} must be 1-128 characters of letters, digits, "
            "'_', '.', ':' or '-' (braces would break the cluster hash tag)"
        )
    return "{megaflow:" + namespace + "}:"


def connect(url: str, *, cluster: bool = False) -> Any:
    """A ``redis.asyncio`` client for ``url``; a cluster client when ``cluster``.

    For a cluster, ``url`` names any one node; the others are discovered.
    Replies are bytes (``decode_responses`` off) because payloads are JSON
    that pydantic parses from bytes directly.
    """
    try:
        from redis.asyncio.retry import Retry
        from redis.backoff import ExponentialBackoff
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError

        # A server restart closes every pooled connection: retry on a fresh one
        # instead of failing the first command that picks up a dead socket.
        retry = Retry(ExponentialBackoff(cap=2.0, base=0.05), retries=5)
        errors = [RedisConnectionError, RedisTimeoutError, ConnectionResetError]
        if cluster:
            from redis.asyncio.cluster import RedisCluster

            return RedisCluster.from_url(url, retry=retry, retry_on_error=errors)
        from redis.asyncio import Redis

        return Redis.from_url(url, retry=retry, retry_on_error=errors)
    except ImportError as exc:
        raise ConfigError(
            "the redis queue and event bus need the 'redis' extra: pip install 'megaflow[redis]'"
        ) from exc
    except ValueError as exc:
        raise ConfigError(f"invalid redis url {url!r}: {exc}") from exc


async def ping(client: Any, url: str) -> None:
    """Fail fast, with the url in the message, when the server cannot be reached."""
    async with translate_errors(url, "ping"):
        await client.ping()


@contextlib.asynccontextmanager
async def translate_errors(url: str, what: str) -> AsyncIterator[None]:
    """Turn redis-py errors into MegaFlow's: unreachable is a retryable
    ``TransportError``, anything the server refused is a ``StorageError``."""
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import RedisError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    try:
        yield
    except MegaFlowError:
        raise
    except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
        raise TransportError(
            f"cannot reach redis at {url} ({what}): {exc}; "
            "check that the server runs and that the url is right"
        ) from exc
    except RedisError as exc:
        raise StorageError(f"redis at {url} refused {what}: {exc}") from exc


async def close(client: Any) -> None:
    await client.aclose()

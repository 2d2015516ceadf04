"""Event bus on a Redis Stream, shared by every process of a namespace.

``publish`` appends the event as JSON to the stream ``{megaflow:<ns>}:events``
(trimmed to about ``max_len`` entries). Each subscription is its own
consumer group, so every subscriber sees every event published after it
subscribed, in publish order. A background reader moves entries into the
subscription's bounded buffer and acknowledges them once they are there.

Backpressure: the reader asks Redis for no more than the buffer has room
for, so a slow subscriber's backlog waits in the stream, never in this
process's memory. Publishers in other processes are not slowed down; a
subscriber that falls more than ``max_len`` events behind loses the oldest
ones. ``overflow="drop_oldest"`` keeps the newest events instead and counts
the dropped ones, as on the in-process bus.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable
from typing import Any

from megaflow.core.events import Event, parse_event
from megaflow.storage import redis_client
from megaflow.storage.abstract import EventBus
from megaflow.storage.subscription import BufferedSubscription, Overflow

_log = logging.getLogger(__name__)
_RETRY_S = 0.5


def _entries(resp: Any) -> list[tuple[bytes, dict[bytes, bytes] | None]]:
    """The (id, fields) pairs of an XREADGROUP reply of one stream, in either
    of redis-py's shapes (``[[stream, entries]]``, or a dict under RESP3)."""
    if not resp:
        return []
    if isinstance(resp, dict):
        return [e for batches in resp.values() for batch in batches for e in batch]
    return [e for _stream, entries in resp for e in entries]


class RedisSubscription(BufferedSubscription):
    def __init__(
        self,
        bus: RedisEventBus,
        group: str,
        kinds: frozenset[str] | None,
        maxsize: int,
        overflow: Overflow,
    ) -> None:
        super().__init__(kinds, maxsize, overflow)
        self._bus = bus
        self.group = group
        self._reader: asyncio.Task[None] | None = None
        self._buffered: set[bytes] = set()  # ids in the buffer, not yet acknowledged
        self._recover = False

    def _room(self) -> int:
        return self.queue.maxsize - self.queue.qsize()

    async def _read(self, block_ms: int | None, count: int, *, wait: bool = True) -> int:
        """One XREADGROUP; returns how many entries it read.

        After an interruption (a cancelled or failed read) Redis may have
        handed out entries that never reached the buffer: they are pending
        under this reader, so it first reads its pending entries again
        (id ``0``), skipping those already buffered, then new ones (``>``).
        """
        bus = self._bus
        start = "0" if self._recover else ">"
        resp = await bus.client.xreadgroup(
            self.group, "reader", {bus.stream: start}, count=count,
            block=None if self._recover else block_ms,
        )  # fmt: skip
        ids: list[bytes] = []
        for entry_id, fields in _entries(resp):
            ids.append(entry_id)
            if entry_id in self._buffered or not fields:  # buffered already, or trimmed
                continue
            event = parse_event(fields[b"e"])
            if self.wants(event):
                await self.deliver(event, wait=wait)
            self._buffered.add(entry_id)
        if self._recover and not ids:
            self._recover = False
        if ids:
            await bus.client.xack(bus.stream, self.group, *ids)
            self._buffered.difference_update(ids)
        return len(ids)

    async def _run(self) -> None:
        while not self.closed:
            try:
                # With a full buffer, read one entry and wait in deliver:
                # the rest of the backlog stays in Redis.
                count = max(1, self._room()) if self.overflow == "block" else self.queue.maxsize
                await self._read(self._bus.block_ms, count)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._recover = True
                if self.closed:  # redis-py may turn our cancellation into its own error
                    return
                if "NOGROUP" in str(exc):  # the server restarted without its data
                    await self._bus.create_group(self.group, "0")
                    continue
                _log.warning("event subscription %s: %s; retrying", self.group, exc)
                await asyncio.sleep(_RETRY_S)

    def start(self) -> None:
        self._reader = asyncio.create_task(self._run(), name=f"megaflow-events-{self.group}")

    async def close(self) -> None:
        """Stop receiving. Events published before ``close`` that fit in the
        buffer can still be read; the consumer group is deleted."""
        if self.closed:
            return
        self.closed = True
        reader = self._reader
        # redis-py can swallow a cancellation that lands outside a blocking
        # read; cancelling again until the reader ends covers that.
        while reader is not None and not reader.done():
            reader.cancel()
            await asyncio.wait([reader], timeout=0.05)
        self._recover = True  # a read may have been cut off mid-way
        if reader is not None and not reader.cancelled() and reader.exception() is not None:
            _log.warning("event subscription %s reader failed: %s", self.group, reader.exception())
        try:
            async with redis_client.translate_errors(self._bus.url, "events close"):
                while self._room() > 0:
                    recovering = self._recover
                    if not await self._read(None, self._room(), wait=False) and not recovering:
                        break
        finally:
            await self._bus.destroy_group(self)


class RedisEventBus(EventBus):
    """Publish/subscribe over one Redis Stream per namespace."""

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        cluster: bool = False,
        namespace: str = "default",
        max_len: int = 100_000,
        block_ms: int = 1000,
        stale_after_s: float = 3600.0,
        client: Any = None,
    ) -> None:
        self.url = url
        self.cluster = cluster
        self.stream = redis_client.key_prefix(namespace) + "events"
        self.max_len = max_len
        self.block_ms = block_ms
        self.stale_after_s = stale_after_s
        self._client = client
        self._owns_client = client is None
        self._subs: list[RedisSubscription] = []
        self.published = 0

    @property
    def client(self) -> Any:
        if self._client is None:
            raise RuntimeError("RedisEventBus is not started; call start() or use 'async with'")
        return self._client

    async def start(self) -> None:
        if self._client is None:
            self._client = redis_client.connect(self.url, cluster=self.cluster)
        await redis_client.ping(self._client, self.url)
        await self.prune_stale_groups()

    async def prune_stale_groups(self) -> int:
        """Delete the consumer groups of subscribers that crashed without closing.

        A live reader touches its group at least every ``block_ms``, so a group
        whose consumers have all been idle for ``stale_after_s`` has lost its
        process. Returns how many groups were deleted.
        """
        pruned = 0
        async with redis_client.translate_errors(self.url, "events prune"):
            if not await self.client.exists(self.stream):
                return 0
            for group in await self.client.xinfo_groups(self.stream):
                name = group["name"]
                name = name.decode() if isinstance(name, bytes) else str(name)
                if not name.startswith("sub-") or any(s.group == name for s in self._subs):
                    continue
                consumers = await self.client.xinfo_consumers(self.stream, name)
                idle_ms = min((int(c["idle"]) for c in consumers), default=None)
                if idle_ms is not None and idle_ms > self.stale_after_s * 1000:
                    await self.client.xgroup_destroy(self.stream, name)
                    pruned += 1
        return pruned

    async def stop(self) -> None:
        for sub in list(self._subs):
            await sub.close()
        if self._owns_client and self._client is not None:
            client, self._client = self._client, None
            await redis_client.close(client)

    async def publish(self, event: Event) -> None:
        async with redis_client.translate_errors(self.url, "events publish"):
            await self.client.xadd(
                self.stream,
                {"e": event.model_dump_json()},
                maxlen=self.max_len,
                approximate=True,
            )
        self.published += 1

    async def subscribe(
        self,
        kinds: Iterable[str] | None = None,
        maxsize: int = 1024,
        overflow: Overflow = "block",
    ) -> RedisSubscription:
        if maxsize < 1:
            raise ValueError(f"subscription maxsize must be at least 1, got {maxsize}")
        group = f"sub-{uuid.uuid4().hex}"
        await self.create_group(group, "$")
        sub = RedisSubscription(
            self, group, None if kinds is None else frozenset(kinds), maxsize, overflow
        )
        self._subs.append(sub)
        sub.start()
        return sub

    async def create_group(self, group: str, start_id: str) -> None:
        """A consumer group reading from ``start_id`` ('$': only new events)."""
        from redis.exceptions import ResponseError

        async with redis_client.translate_errors(self.url, "events subscribe"):
            try:
                await self.client.xgroup_create(self.stream, group, start_id, mkstream=True)
            except ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise

    async def destroy_group(self, sub: RedisSubscription) -> None:
        if sub in self._subs:
            self._subs.remove(sub)
        if self._client is not None:
            async with redis_client.translate_errors(self.url, "events unsubscribe"):
                await self._client.xgroup_destroy(self.stream, sub.group)

"""Task queue on Redis Streams, shared by every scheduler of a namespace.

One stream per priority ("lane") with a consumer group: ``pop`` reads the
highest lane first, oldest entry first, so the order is the same as the
in-process queue's. A popped entry stays pending under its consumer until
``ack``; if that consumer crashes, a later ``pop`` by any consumer claims
the entry once it has been idle for ``claim_after_s`` (``XAUTOCLAIM``) and
delivers it again. Delivery is therefore at least once, and the scheduler
acknowledges an entry once it has recorded the task.

An id is in the queue at most once: pushing a queued id does nothing, and
pushing an id whose delivery is still unacknowledged replaces that
delivery. See :mod:`megaflow.storage.redis_queue_lua` for the key layout.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from megaflow.core.tasks import TaskSpec
from megaflow.storage import redis_client
from megaflow.storage import redis_queue_lua as lua
from megaflow.storage.abstract import QueuedTask, TaskQueue

GROUP = "megaflow"


def default_consumer() -> str:
    """A consumer name unique to this process: host, pid and a random tag."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class RedisTaskQueue(TaskQueue):
    """Priority task queue on Redis Streams (a single server or a cluster).

    ``client`` lets several stores share one connection pool; the queue then
    does not close it. Otherwise it connects to ``url`` on ``start``.
    """

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        cluster: bool = False,
        namespace: str = "default",
        consumer: str | None = None,
        claim_after_s: float = 60.0,
        client: Any = None,
    ) -> None:
        if claim_after_s < 0:
            raise ValueError(f"claim_after_s must be >= 0, got {claim_after_s}")
        self.url = url
        self.cluster = cluster
        self.namespace = namespace
        self.prefix = redis_client.key_prefix(namespace)
        self.consumer = consumer or default_consumer()
        self.claim_after_ms = int(claim_after_s * 1000)
        self._client = client
        self._owns_client = client is None
        self._scripts: dict[str, Any] = {}
        self._keys = [self.prefix + "q:lanes", self.prefix + "q:queued", self.prefix + "q:pending"]

    async def start(self) -> None:
        if self._scripts:
            return
        if self._client is None:
            self._client = redis_client.connect(self.url, cluster=self.cluster)
        await redis_client.ping(self._client, self.url)
        for name in ("PUSH", "POP", "PEEK", "SIZE", "REMOVE", "ACK"):
            body = lua.PRELUDE + getattr(lua, name)
            self._scripts[name] = self._client.register_script(body)

    async def stop(self) -> None:
        self._scripts = {}
        if self._owns_client and self._client is not None:
            client, self._client = self._client, None
            await redis_client.close(client)

    async def _run(self, name: str, *args: str | int) -> Any:
        if not self._scripts:
            raise RuntimeError("RedisTaskQueue is not started; call start() or use 'async with'")
        async with redis_client.translate_errors(self.url, f"queue {name.lower()}"):
            return await self._scripts[name](keys=self._keys, args=[self.prefix, GROUP, *args])

    @staticmethod
    def _decode(flat: list[bytes]) -> list[QueuedTask]:
        return [
            QueuedTask(spec=TaskSpec.model_validate_json(flat[i + 1]), seq=int(flat[i]))
            for i in range(0, len(flat), 2)
        ]

    async def push(self, items: Sequence[QueuedTask]) -> None:
        args: list[str | int] = []
        for item in items:
            spec = item.spec
            args += [spec.id, str(spec.priority), str(item.seq), spec.model_dump_json()]
        if args:
            await self._run("PUSH", *args)

    async def pop(self, n: int = 1) -> list[QueuedTask]:
        if n <= 0:
            return []
        return self._decode(await self._run("POP", self.consumer, n, self.claim_after_ms))

    async def peek(self, n: int = 1) -> list[QueuedTask]:
        if n <= 0:
            return []
        return self._decode(await self._run("PEEK", n, self.claim_after_ms))

    async def remove(self, task_ids: Iterable[str]) -> int:
        ids = list(task_ids)
        return int(await self._run("REMOVE", *ids)) if ids else 0

    async def ack(self, task_ids: Iterable[str]) -> int:
        ids = list(task_ids)
        return int(await self._run("ACK", *ids)) if ids else 0

    async def size(self) -> int:
        return int(await self._run("SIZE", self.claim_after_ms))

    async def unacked(self) -> int:
        """Entries delivered to some consumer and not yet acknowledged."""
        if self._client is None:
            raise RuntimeError("RedisTaskQueue is not started; call start() or use 'async with'")
        async with redis_client.translate_errors(self.url, "queue unacked"):
            return int(await self._client.hlen(self._keys[2]))

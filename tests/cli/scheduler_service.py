"""A Scheduler service on loopback, for the commands that talk to a cluster."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import yaml

from megaflow.rpc.auth import generate_token
from megaflow.rpc.scheduler_server import SchedulerServicer
from megaflow.rpc.server import RpcServer
from megaflow.scheduler.config import SchedulerConfig
from megaflow.scheduler.control import LocalControlPlane
from megaflow.scheduler.service import Scheduler
from megaflow.scheduler.synthetic import SleepExecutor
from megaflow.storage.factory import Stores
from megaflow.storage.local_artifacts import LocalArtifactStore
from megaflow.storage.memory_bus import MemoryEventBus
from megaflow.storage.memory_queue import MemoryTaskQueue
from megaflow.storage.sqlite import SqliteMetadataStore

T = TypeVar("T")


class ClusterScheduler:
    """A Scheduler service on loopback, in a thread with its own event loop."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.token = generate_token()
        self.token_file = root / "token"
        self.config_file = root / "cluster.yaml"
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self.cp: LocalControlPlane | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(
            target=self.loop.run_until_complete, args=(self._serve(root),)
        )

    async def _serve(self, root: Path) -> None:
        stores = Stores(
            metadata=SqliteMetadataStore(str(root / "c.db")), queue=MemoryTaskQueue(),
            events=MemoryEventBus(), artifacts=LocalArtifactStore(root / "art"),
        )  # fmt: skip
        self._stop = asyncio.Event()
        async with (
            stores,
            Scheduler(SchedulerConfig(max_concurrency=1), stores, SleepExecutor()) as sched,
        ):
            self.cp = LocalControlPlane(sched)
            server = RpcServer(self.token, port=0)
            server.add(SchedulerServicer(self.cp).register)
            async with server:
                self.port = server.port
                self._write_config()
                self._ready.set()
                await self._stop.wait()

    @property
    def url(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _write_config(self) -> None:
        """A cluster config naming this scheduler, its token file and its store."""
        self.token_file.write_text(self.token)
        self.token_file.chmod(0o600)
        cfg = {
            "auth": {"token_file": str(self.token_file)},
            "scheduler": {
                "port": self.port,
                "storage": {"metadata": {"type": "sqlite", "path": str(self.root / "c.db")}},
            },
        }
        self.config_file.write_text(yaml.safe_dump(cfg))

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def __enter__(self) -> ClusterScheduler:
        self._thread.start()
        assert self._ready.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._stop is not None
        self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)
        self.loop.close()

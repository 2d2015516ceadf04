"""The container runtime's image cache: a size bound, LRU eviction, loading ahead.

Per-task images (one per SWE-bench instance) do not all fit on a machine,
and loading one can take longer than the task's sandbox start. The cache
sits on :class:`~megaflow.environment.container.images.ImageResolver`:

* **Use counts.** :meth:`ImageCache.acquire` resolves (loads if needed) the
  image of a sandbox being created and counts it in use until
  :meth:`ImageCache.release`; an image in use is never removed.
* **Size bound.** Only images the resolver brought into the engine itself
  (loaded from an archive, pulled, imported from a root filesystem) count
  against ``max_cache_gb`` and may be removed: they can be loaded again.
  Images that were in the engine before are used as they are and never
  touched. Past the bound, the least recently used image that no sandbox of
  this runtime uses and no container of the engine runs is removed (images
  of upcoming tasks go last), until the rest fits.
* **Loading ahead.** :meth:`ImageCache.plan` takes the images of the tasks
  next in the queue, in order; the cache keeps the first ``prefetch`` of
  them not yet in the engine loading in the background, and moves along the
  list as sandboxes of those images start. A start whose image is still
  loading waits for that load (never a second one); a failed load ahead is
  not an error until a sandbox asks for the image, which then tries again
  and reports why.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import docker
from docker.errors import APIError, DockerException, ImageNotFound

from megaflow.environment.config import ImageCacheConfig
from megaflow.environment.container.images import ImageResolver

log = logging.getLogger(__name__)
GB = 1024**3


@dataclass
class _Entry:
    ref: str
    size: int
    evictable: bool
    last_used: float
    users: int = 0


class ImageCache:
    """Use counts, a size bound with LRU eviction, and loading ahead, per runtime."""

    def __init__(
        self,
        resolver: ImageResolver,
        client: docker.DockerClient,
        config: ImageCacheConfig | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.resolver = resolver
        self.config = config or ImageCacheConfig()
        self.evicted: list[str] = []
        """Images removed to keep the bound, oldest first."""
        self._client = client
        self._clock = clock
        self._entries: dict[str, _Entry] = {}
        self._upcoming: list[str] = []
        self._loading: dict[str, asyncio.Task[None]] = {}
        self._evicting: asyncio.Task[None] | None = None

    # -- what sandboxes use ----------------------------------------------------

    async def acquire(self, image: str) -> str:
        """The engine reference of ``image``, loaded if needed, counted in use."""
        ref = await self._ensure(image)
        entry = self._entries[image]
        entry.users += 1
        entry.last_used = self._clock()
        if image in self._upcoming:
            self._upcoming.remove(image)
        self._advance()
        await self._evict()
        return ref

    def release(self, image: str) -> None:
        """A sandbox of ``image`` is gone; its image may be evicted again."""
        entry = self._entries.get(image)
        if entry is None:
            return
        entry.users = max(entry.users - 1, 0)
        entry.last_used = self._clock()
        if self.over_bound():
            self._evicting = asyncio.get_running_loop().create_task(self._evict(self._evicting))

    def plan(self, images: Sequence[str]) -> None:
        """The images of the tasks next in the queue, first first; loads the
        first ``prefetch`` of them that are not loaded yet, in the background."""
        self._upcoming = list(images)
        self._advance()

    async def close(self) -> None:
        """Stop loading ahead and evicting (the runtime is stopping)."""
        pending = [*self._loading.values(), *([self._evicting] if self._evicting else [])]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        self._loading.clear()
        self._evicting = None

    async def prefetched(self) -> None:
        """Wait until the loads ahead started so far have ended (tests, benchmarks)."""
        await asyncio.gather(*self._loading.values(), return_exceptions=True)
        if self._evicting is not None:
            await asyncio.gather(self._evicting, return_exceptions=True)

    # -- sizes ------------------------------------------------------------------

    def cached_bytes(self) -> int:
        """Bytes of the images the cache may remove (those it brought in)."""
        return sum(e.size for e in self._entries.values() if e.evictable)

    def over_bound(self) -> bool:
        bound = self.config.max_cache_gb
        return bound is not None and self.cached_bytes() > bound * GB

    def in_use(self) -> dict[str, int]:
        """Image -> sandboxes of this runtime using it, for those in use."""
        return {image: e.users for image, e in self._entries.items() if e.users}

    # -- inside -----------------------------------------------------------------

    async def _ensure(self, image: str, ahead: bool = False) -> str:
        loading = None if ahead else self._loading.get(image)
        if loading is not None:
            await asyncio.gather(loading, return_exceptions=True)
        ref = await self.resolver.resolve(image)
        if image not in self._entries:
            evictable = image in self.resolver.origin
            size = await asyncio.to_thread(self._size, ref) if evictable else 0
            # another start of the same image may have counted itself meanwhile
            self._entries.setdefault(image, _Entry(ref, size, evictable, self._clock()))
        return ref

    def _size(self, ref: str) -> int:
        try:
            return int(self._client.images.get(ref).attrs.get("Size") or 0)
        except DockerException:
            return 0

    def _advance(self) -> None:
        """Keep the first ``prefetch`` upcoming images that are not loaded loading."""
        wanted = 0
        for image in dict.fromkeys(self._upcoming):
            if wanted >= self.config.prefetch:
                break
            if image in self._entries:
                continue
            wanted += 1
            if image not in self._loading:
                task = asyncio.get_running_loop().create_task(self._load_ahead(image))
                self._loading[image] = task

    async def _load_ahead(self, image: str) -> None:
        try:
            await self._ensure(image, ahead=True)
            await self._evict()
        except Exception as e:  # the sandbox that needs it will try again and say why
            log.warning("loading image %r ahead failed: %s", image, e)
        finally:
            self._loading.pop(image, None)

    def _victims(self) -> list[str]:
        """Removable images, the first to go first."""
        order = {image: i for i, image in enumerate(reversed(self._upcoming))}
        free = [i for i, e in self._entries.items() if e.evictable and e.users == 0]
        # not upcoming before upcoming (the last in the queue first), then least recent
        return sorted(free, key=lambda i: (i in order, order.get(i, 0), self._entries[i].last_used))

    async def _evict(self, after: asyncio.Task[None] | None = None) -> None:
        if after is not None:  # one eviction at a time, each seeing the releases before it
            await asyncio.gather(after, return_exceptions=True)
        for image in self._victims():
            if not self.over_bound():
                return
            entry = self._entries.get(image)
            if entry is None:
                continue
            async with self.resolver.locks.setdefault(image, asyncio.Lock()):
                if entry.users or self._entries.get(image) is not entry:
                    continue
                self.resolver.forget(image)  # a start from here on loads it again
                del self._entries[image]
                removed = await asyncio.to_thread(self._remove, entry.ref)
                if removed:
                    self.evicted.append(image)
                else:  # another process's container runs it: keep counting it
                    self._entries[image] = entry

    def _remove(self, ref: str) -> bool:
        """Remove an image no container uses; False when one does (or it cannot go)."""
        api = self._client.api
        try:
            if api.containers(all=True, filters={"ancestor": ref}):
                return False
            api.remove_image(ref)
        except ImageNotFound:
            return True
        except APIError as e:
            if e.status_code == 409:  # in use after all
                return False
            log.warning("removing image %r failed: %s", ref, e)
            return False
        except DockerException as e:
            log.warning("removing image %r failed: %s", ref, e)
            return False
        return True

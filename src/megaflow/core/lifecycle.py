"""The async lifecycle shared by stores, runtimes, pools, services and servers.

A subclass overrides :meth:`start` and :meth:`stop` (both optional no-ops
here); ``async with obj`` then starts it on entry and stops it on exit.
"""

from __future__ import annotations

from types import TracebackType
from typing import Self


class Lifecycle:
    """``await x.start()`` / ``await x.stop()``, or ``async with x``."""

    async def start(self) -> None:
        """Open what the object needs. Optional hook."""

    async def stop(self) -> None:
        """Release what :meth:`start` opened. Optional hook."""

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

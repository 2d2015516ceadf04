"""SIGTERM ends a long command the way Ctrl-C does.

``asyncio.run`` turns Ctrl-C into a cancellation of the command's work, so its
cleanup runs (engines a train run started, sandboxes, the driver lease) and the
command ends with ``KeyboardInterrupt``. SIGTERM, what a process supervisor,
``kill`` or a container runtime sends, would instead end the process at once
and skip all of it. :func:`interruptible` gives SIGTERM Ctrl-C's path::

    asyncio.run(interruptible(loop.run()))    # SIGTERM -> KeyboardInterrupt

A second SIGTERM while the cleanup runs is ignored: the cleanup bounds itself.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


async def interruptible(work: Coroutine[Any, Any, T]) -> T:
    """``work``'s result; on SIGTERM, ``work`` is cancelled, and once its cleanup
    finished, KeyboardInterrupt is raised as for Ctrl-C."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(work)
    terminated = False

    def on_sigterm() -> None:
        nonlocal terminated
        if not terminated:
            terminated = True
            task.cancel()

    loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    try:
        return await task
    except asyncio.CancelledError:
        if terminated:
            raise KeyboardInterrupt("SIGTERM") from None
        raise
    finally:
        loop.remove_signal_handler(signal.SIGTERM)

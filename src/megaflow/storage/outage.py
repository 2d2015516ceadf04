"""Transient store faults, and how long a store may be away.

A store that goes away for a while (a PostgreSQL or S3 server restarting, a
disk that fills and is freed again) must not turn finished work into failed
tasks. :func:`transient` says whether an error is such a fault: a connection
refused, lost or timed out, a pool with no connection to give, a full disk.
:class:`Outage` is the retry loop every store call of
:mod:`megaflow.storage.retrying` goes through: it retries a transient fault
with exponential backoff, for at most ``deadline_s`` seconds counted from the
store's first failure (one clock per store, shared by all its calls, reset
by any success), and then declares the store unavailable. From then on every
call of that store is tried once, without waiting, and fails with the same
:class:`StoreUnavailable` while the fault lasts (a success revives the
store), so a run stops within the deadline instead of waiting for ever, and
the :class:`Faults` of the run's stores tell whoever waits on the run.

The classification walks the exception chain by type and errno, without
importing the optional drivers: psycopg, redis-py and pymongo errors are
recognised by the module and name of their classes.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from megaflow.core.errors import MegaFlowTimeout, StoreUnavailable, TransportError

log = logging.getLogger(__name__)
T = TypeVar("T")

_ERRNOS = frozenset(
    {
        errno.ENOSPC,
        errno.EDQUOT,
        errno.ECONNREFUSED,
        errno.ECONNRESET,
        errno.ECONNABORTED,
        errno.ETIMEDOUT,
        errno.EPIPE,
        errno.EHOSTUNREACH,
        errno.ENETUNREACH,
    }
)
_SQLITE = ("database or disk is full", "database is locked", "disk i/o error")
_DRIVER_FAULTS = {
    "psycopg": {"OperationalError", "PoolTimeout", "TooManyRequests"},
    "redis": {"ConnectionError", "TimeoutError", "BusyLoadingError", "TryAgainError",
              "ClusterDownError", "MasterDownError"},
    "pymongo": {"AutoReconnect", "ConnectionFailure", "ServerSelectionTimeoutError",
                "NetworkTimeout", "NotPrimaryError"},
}  # fmt: skip


def _driver_fault(exc: BaseException) -> bool:
    for cls in type(exc).__mro__:
        root = cls.__module__.split(".", 1)[0].removesuffix("_pool")
        if cls.__name__ in _DRIVER_FAULTS.get(root, ()):
            return True
    return False


def transient(exc: BaseException) -> bool:
    """Whether ``exc`` (or an error it was raised from) is a fault that passes:
    the store is unreachable or its disk is full, not that the call was wrong."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, StoreUnavailable | MegaFlowTimeout):
            return False  # given up already / a task's own deadline
        if isinstance(cur, TransportError | ConnectionError | TimeoutError):
            return True
        if isinstance(cur, OSError) and cur.errno in _ERRNOS:
            return True
        if isinstance(cur, sqlite3.OperationalError) and str(cur).lower().startswith(_SQLITE):
            return True
        if _driver_fault(cur):
            return True
        cur = cur.__cause__ or cur.__context__
    return False


class Faults:
    """The outage state of a set of stores: the first one that gave up, and a way
    to wait for that. Shared by the stores of one run."""

    def __init__(self) -> None:
        self.dead: StoreUnavailable | None = None
        self._waiters: list[asyncio.Future[StoreUnavailable]] = []

    def give_up(self, err: StoreUnavailable) -> None:
        if self.dead is None:
            self.dead = err
        for fut in self._waiters:
            if not fut.done():
                fut.set_result(self.dead)
        self._waiters.clear()

    async def wait(self) -> StoreUnavailable:
        """Return the error of the first store that gave up, once one has."""
        if self.dead is not None:
            return self.dead
        fut: asyncio.Future[StoreUnavailable] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            return await fut
        finally:
            if fut in self._waiters:
                self._waiters.remove(fut)


class Outage:
    """The retry loop of one store's calls (see the module docstring)."""

    def __init__(
        self,
        store: str,
        where: str,
        faults: Faults,
        *,
        deadline_s: float,
        base_s: float = 0.2,
        max_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.where = where
        self.faults = faults
        self.deadline_s = deadline_s
        self.base_s = base_s
        self.max_s = max_s
        self.clock = clock
        self.down_since: float | None = None
        self.dead: StoreUnavailable | None = None
        self.faults_seen = 0
        """Transient faults retried, over the store's life (for tests and reports)."""

    @property
    def name(self) -> str:
        return f"the {self.store} store ({self.where})"

    async def call(
        self,
        what: str,
        op: Callable[[], Awaitable[T]],
        settled: Callable[[Exception], Awaitable[T | None]] | None = None,
    ) -> T:
        """``await op()``, retrying transient faults until the store's deadline.

        ``settled``, if given, is asked about an error a *retry* raised (say
        ``AlreadyExists`` after a lost reply to a commit that did happen): it
        returns the call's result if the earlier try did the work, else None."""
        if self.dead is not None:
            return await self._probe(what, op)
        retried = False
        delay = self.base_s
        while True:
            try:
                result = await op()
            except Exception as exc:
                if retried and settled is not None and not transient(exc):
                    try:
                        done = await settled(exc)
                    except Exception as again:  # the check itself met the fault
                        if not transient(again):
                            raise
                        exc, done = again, None
                    if done is not None:
                        self._back()
                        return done
                if not transient(exc) or self.deadline_s <= 0:
                    raise
                left = self._fault(what, exc)
                retried = True
                await asyncio.sleep(min(delay, left))
                delay = min(self.max_s, delay * 2)
                continue
            self._back()
            return result

    async def _probe(self, what: str, op: Callable[[], Awaitable[T]]) -> T:
        """After giving up: one try per call, no waiting (a run stopping gets its
        answer at once); a success means the store is back."""
        assert self.dead is not None
        try:
            result = await op()
        except Exception as exc:
            if transient(exc):
                raise self.dead from exc
            raise
        log.warning("%s answers again", self.name)
        self.dead = self.down_since = None
        return result

    def _fault(self, what: str, exc: Exception) -> float:
        """Note a transient fault; the seconds left before the deadline, or raise."""
        self.faults_seen += 1
        now = self.clock()
        if self.down_since is None:
            self.down_since = now
            log.warning(
                "%s failed to %s: %s; retrying for up to %g s", self.name, what,
                _short(exc), self.deadline_s,
            )  # fmt: skip
        left = self.down_since + self.deadline_s - now
        if left > 0:
            return left
        if self.dead is None:
            self.dead = StoreUnavailable(
                f"{self.name} has not been usable for {self.deadline_s:g} s "
                f"(storage.outage.deadline_s); last error, trying to {what}: {_short(exc)}",
                self.store,
            )
            self.faults.give_up(self.dead)
        raise self.dead from exc

    def _back(self) -> None:
        if self.down_since is not None:
            log.warning("%s is back after %.1f s", self.name, self.clock() - self.down_since)
            self.down_since = None


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}"

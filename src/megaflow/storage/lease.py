"""One driver per run: the driver lease every metadata store keeps.

A process that drives a run (schedules its tasks, records their attempts)
first claims the run's lease in the metadata store: one row (document) per
run naming its owner (``host:pid:random``) and when the lease ends. A claim
succeeds when there is no lease, when it has ended, or when the claimant
already holds it (that is a renewal); otherwise it raises
:class:`~megaflow.core.errors.AlreadyExists` naming the holder and when its
lease ends. Each backend makes the claim one atomic conditional write, so of
two claimants at the same moment exactly one wins.

:class:`DriverLease` holds a lease for a running job: it claims it on
``start()``, renews it every third of its time to live in the background,
and releases it on ``stop()``. A driver that was frozen (or cut off from its
store) past the end of its lease, while another process took the run over,
learns it at its next renewal: :meth:`DriverLease.lost` then gives the error
its job stops with, instead of two drivers racing on one run. A driver that
dies leaves its lease to end by itself, so ``--resume`` works ``ttl_s``
after a crash; on the host where it ran, a driver whose process is gone
(:func:`dead_here`) is taken over at once. Processes on hosts of the same
name must share one pid namespace for that check (containers have hosts of
their own names).

Clocks: a lease's end is written with the claimant's wall clock and compared
with the next claimant's. Hosts that drive the same run must agree on the
time to well within ``ttl_s`` (NTP does); a host whose clock runs ``d``
seconds ahead sees other leases end ``d`` seconds early.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from megaflow.core.errors import (
    AlreadyExists,
    LeaseLost,
    MegaFlowError,
    StorageError,
    StoreUnavailable,
)
from megaflow.core.lifecycle import Lifecycle

if TYPE_CHECKING:
    from megaflow.storage.abstract import MetadataStore

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Lease:
    """Who drives ``run_id``, until when (seconds since the epoch)."""

    run_id: str
    owner: str
    expires_at: float


def new_owner() -> str:
    """An owner id for this process: ``host:pid:random`` (two drivers in one process,
    or a pid reused after a reboot, still differ)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def dead_here(owner: str) -> bool:
    """Whether ``owner`` was a process of this host that no longer runs. Its lease
    need not be waited out: ``--resume`` right after a crash on the same host takes
    the run over at once. A live pid (even one reused by another program), or
    another host's owner, is never judged dead: their leases end by themselves."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def held_by(holder: Lease, now: float | None = None) -> AlreadyExists:
    """The error for a claim refused because ``holder`` drives the run."""
    now = time.time() if now is None else now
    ends = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(holder.expires_at))
    return AlreadyExists(
        f"run {holder.run_id} is driven by another process ({holder.owner}); its lease "
        f"ends at {ends} UTC, in {max(0.0, holder.expires_at - now):.0f} s unless it is "
        f"renewed. Nothing was run. If that process is dead, run `megaflow run --resume "
        f"{holder.run_id}` again once its lease has ended"
    )


class DriverLease(Lifecycle):
    """Holds the lease of ``run_id`` while a job drives it (see the module doc)."""

    def __init__(
        self,
        metadata: MetadataStore,
        run_id: str,
        ttl_s: float,
        *,
        owner: str | None = None,
        clock: Callable[[], float] = time.time,
        end_in_place: bool = False,
    ) -> None:
        """``end_in_place``: on ``stop()`` the lease is renewed to end at once rather than
        deleted, so readers still see who drove and that it stopped (the cluster
        scheduler service, whose submitted runs outlive it)."""
        self.end_in_place = end_in_place
        self.metadata = metadata
        self.run_id = run_id
        self.ttl_s = ttl_s
        self.owner = owner or new_owner()
        self.clock = clock
        self.lease: Lease | None = None
        self._renewer: asyncio.Task[None] | None = None
        self._lost: asyncio.Future[StorageError] | None = None

    async def start(self) -> None:
        self._lost = asyncio.get_running_loop().create_future()
        try:
            self.lease = await self.metadata.claim_lease(self.run_id, self.owner, self.ttl_s)
        except AlreadyExists:
            holder = await self.metadata.get_lease(self.run_id)
            if holder is not None and not dead_here(holder.owner):
                raise
            if holder is not None:
                log.warning(
                    "run %s: its last driver %s is no longer running; taking the run over",
                    self.run_id, holder.owner,
                )  # fmt: skip
            self.lease = await self.metadata.claim_lease(
                self.run_id, self.owner, self.ttl_s,
                replaces=None if holder is None else holder.owner,
            )  # fmt: skip
        self._renewer = asyncio.create_task(self._renew(), name=f"lease {self.run_id}")

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self.ttl_s / 3)
            try:
                self.lease = await self.metadata.claim_lease(self.run_id, self.owner, self.ttl_s)
            except AlreadyExists as exc:
                self._lose(exc)
                return
            except StoreUnavailable:
                return  # the run stops on the outage itself (Stores.faults)
            except MegaFlowError as exc:  # not transient: keep trying while the lease lasts
                log.warning("run %s: cannot renew the driver lease: %s", self.run_id, exc)

    def _lose(self, exc: AlreadyExists) -> None:
        assert self._lost is not None
        if not self._lost.done():
            self._lost.set_result(
                LeaseLost(
                    f"this process ({self.owner}) lost the driver lease of run {self.run_id}: "
                    f"it was not renewed within {self.ttl_s:g} s (the process was frozen or "
                    f"the metadata store away) and another process took the run over ({exc}). "
                    f"This process stopped driving it so that two drivers never race"
                )
            )

    async def confirm(self) -> StorageError | None:
        """Renew now, outside the schedule: the error to stop with when another process
        holds the run, else None. A job whose work failed asks this first: a driver
        woken from a freeze can meet the new driver's writes (a task already moved on)
        before its renewer runs, and the cause to report is the lost lease."""
        if self._lost is not None and self._lost.done():
            return self._lost.result()
        try:
            self.lease = await self.metadata.claim_lease(self.run_id, self.owner, self.ttl_s)
        except AlreadyExists as exc:
            self._lose(exc)
            return await self.lost()
        except MegaFlowError:
            return None  # the store is away: the failure stands as it is
        return None

    async def fence(self) -> None:
        """Called before each write of the run: raises the lost-lease error once another
        process holds the run. While the lease has a third of its time left this costs
        nothing; past that (the renewer is late: the process was frozen, or the store
        slow) it renews first, so a driver woken after its lease ended learns it before
        its first write, not after it."""
        if self._lost is not None and self._lost.done():
            raise self._lost.result()
        lease = self.lease
        if lease is None or self.clock() < lease.expires_at - self.ttl_s / 3:
            return
        taken = await self.confirm()
        if taken is not None:
            raise taken

    async def lost(self) -> StorageError:
        """Wait until the lease is lost to another driver; the error to stop with."""
        assert self._lost is not None, "the lease is not started"
        return await asyncio.shield(self._lost)

    async def stop(self) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewer
            self._renewer = None
        if self.lease is not None and (self._lost is None or not self._lost.done()):
            self.lease = None
            with contextlib.suppress(MegaFlowError):  # it ends by itself within ttl_s
                if self.end_in_place:
                    await self.metadata.claim_lease(self.run_id, self.owner, 0.0)
                else:
                    await self.metadata.release_lease(self.run_id, self.owner)


#: The lease the cluster's scheduler service (``megaflow up`` / ``megaflow serve
#: scheduler``) holds while it runs. It drives every run of its store that no job of
#: its own leases (a run sent with ``megaflow submit``), so such a run's driver is
#: alive while this lease is and gone once it has ended.
SCHEDULER_LEASE = "megaflow:scheduler-service"


def lease_ended(lease: Lease, now: float | None = None) -> bool:
    """Whether ``lease``'s holder no longer drives: its time is up, or it was a process
    of this host that is gone."""
    return lease.expires_at <= (time.time() if now is None else now) or dead_here(lease.owner)


async def driver_lease(metadata: MetadataStore, job: str) -> Lease | None:
    """The lease of whoever drives the runs of ``job``: the job's own (an embedded run),
    else the cluster scheduler service's (a submitted run); None when neither exists."""
    return await metadata.get_lease(job) or await metadata.get_lease(SCHEDULER_LEASE)

"""Health checks of a router's replicas: probe each one, take the dead out, put them back.

A :class:`HealthMonitor` probes every replica of a fleet (a
:class:`~megaflow.model.routing.Router`) each ``interval_s`` seconds with the
backend's own :meth:`~megaflow.model.abstract.Backend.probe` (the ``openai``
backend asks ``GET /models`` on a connection of its own, so a full call pool
does not read as a dead server), bounded by ``timeout_s``. A replica that
fails ``failures`` probes in a row is taken out of rotation: no new call picks
it, and its calls in flight are aborted as transport errors, so a hung server
(one that accepts connections but never answers) costs at most
``failures * (interval_s + timeout_s)`` seconds instead of the call timeout.

A replica that answers again is put back at the fleet's weights version
only: one that missed updates while it was out would otherwise generate with
old weights. Before deciding, the monitor asks the engine which version it
serves (:class:`ReportsVersion`; an engine restarted at the same address
serves its base weights, v0, whatever the client last installed). If the
fleet's last update was a checkpoint path (``Router.latest_weights``, kept
by the model control), the replica loads it first, beside the probes. Else
(a broadcast update, or a load that failed) it is marked ``catching_up``:
it stays out, and the model control sends it the next update (re-forming
the broadcast group with it) and puts it back once it serves that version.

A replica in rotation whose engine reports an older version than the one
it was given (it restarted between two probes) is taken out the same way,
so no call is routed to it as if it served the fleet's weights.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Generic, Protocol, TypeVar, runtime_checkable

from megaflow.model.abstract import Backend
from megaflow.model.config import HealthCheckConfig

log = logging.getLogger(__name__)


@runtime_checkable
class ReportsVersion(Protocol):
    """A backend that can ask its engine which weights version it serves now."""

    async def served_version(self) -> int | None:
        """The engine's own answer (None if it keeps none); a backend adopts an
        answer older than what it installed (the engine restarted)."""
        ...


class Member(Protocol):
    """What the monitor reads and writes of a replica."""

    backend: Backend
    healthy: bool
    problem: str | None
    catching_up: bool
    probe_failures: int


M = TypeVar("M", bound=Member)


class Fleet(Protocol[M]):
    """What the monitor needs of a router."""

    @property
    def replicas(self) -> Sequence[M]: ...

    @property
    def latest_weights(self) -> tuple[str, int] | None:
        """The checkpoint path and version the replicas in rotation last took, if a path."""

    def take_out(self, member: M, reason: str) -> None: ...

    def put_back(self, member: M, why: str = ...) -> None: ...

    def fleet_version(self) -> int:
        """The version a replica must serve to be in rotation."""


class HealthMonitor(Generic[M]):
    """Probes ``fleet``'s replicas in the background between ``start`` and ``stop``."""

    def __init__(self, fleet: Fleet[M], config: HealthCheckConfig) -> None:
        self.fleet = fleet
        self.config = config
        self.failures: dict[int, int] = {}
        """Probes failed in a row, by ``id(member)``."""
        self._task: asyncio.Task[None] | None = None
        self._catching: dict[int, asyncio.Task[None]] = {}
        """Replicas being put back (loading the fleet's weights first), by ``id``."""

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="model-health")

    async def stop(self) -> None:
        tasks = [t for t in (self._task, *self._catching.values()) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._task = None

    async def _run(self) -> None:
        while True:
            await self.check()
            await asyncio.sleep(self.config.interval_s)

    async def check(self) -> None:
        """Probe every replica once, at the same time, and act on the answers."""
        members = list(self.fleet.replicas)
        await asyncio.gather(*(self._check(m) for m in members))

    async def _check(self, member: M) -> None:
        try:
            async with asyncio.timeout(self.config.timeout_s):
                await member.backend.probe()
                given = member.backend.weights_version
                served = await _served(member.backend)
        except Exception as exc:  # any failure to answer counts, whatever it was
            if isinstance(exc, TimeoutError):
                why = f"no answer to a health probe within {self.config.timeout_s:g}s"
            else:
                why = f"health probe failed: {exc}"
            self._failed(member, why)
            return
        if member.healthy and served is not None and served < given:
            self.fleet.take_out(
                member,
                f"serves weights v{served} though it was given v{given} (restarted); it "
                "catches up before it serves again",
            )
        self._answered(member)

    async def settled(self) -> None:
        """Wait for the put-backs in progress (a replica loading the fleet's weights)."""
        await asyncio.gather(*list(self._catching.values()), return_exceptions=True)

    def _failed(self, member: M, why: str) -> None:
        member.probe_failures += 1
        member.catching_up = False  # gone again: an update must not wait for it
        n = self.failures[id(member)] = self.failures.get(id(member), 0) + 1
        if member.healthy and n >= self.config.failures:
            self.fleet.take_out(member, f"{why} ({n} in a row)")

    def _answered(self, member: M) -> None:
        self.failures[id(member)] = 0
        if member.healthy or id(member) in self._catching:
            return
        task = asyncio.create_task(self._readmit(member), name="model-health-readmit")
        self._catching[id(member)] = task
        task.add_done_callback(lambda _: self._catching.pop(id(member), None))

    async def _readmit(self, member: M) -> None:
        """Put ``member`` back at the fleet's version: load the latest checkpoint into
        it first if it missed updates (the load runs beside the probes, not in them);
        with no checkpoint to load, leave it to the next update (``catching_up``)."""
        backend = member.backend
        fleet = self.fleet.fleet_version()
        latest = self.fleet.latest_weights
        if backend.weights_version != fleet and latest is not None and latest[1] == fleet:
            try:
                await backend.update_weights(latest[0], fleet)
            except Exception as exc:  # the next update or probe tries again
                self._behind(member, fleet, f"did not load weights v{fleet}: {exc}")
                return
        if backend.weights_version != fleet:
            self._behind(member, fleet, f"no checkpoint of v{fleet} to load")
            return
        self.fleet.put_back(member, f"answers again at weights v{fleet}")

    def _behind(self, member: M, fleet: int, why: str) -> None:
        member.problem = (
            f"answers again but serves weights v{member.backend.weights_version} while the "
            f"fleet serves v{fleet}: {why}; the next weight update brings it back"
        )
        if not member.catching_up:
            log.warning("model replica %s is out until it catches up: %s",
                        member.backend.name, member.problem)  # fmt: skip
        member.catching_up = True


async def _served(backend: Backend) -> int | None:
    """The version ``backend``'s engine says it serves, if it can tell."""
    if isinstance(backend, ReportsVersion):
        return await backend.served_version()
    return None

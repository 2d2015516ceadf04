"""The driver lease (one driver per run) on every MetadataStore, and its keeper.

The contract runs on SQLite, in memory, and on real PostgreSQL and MongoDB
wire servers (``backend`` in ``conftest.py``); each claim is one atomic
conditional write, so of many claimants at once exactly one wins.
"""

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from megaflow.core.errors import AlreadyExists, StorageError
from megaflow.core.states import TaskState
from megaflow.core.tasks import RunSpec, TaskSpec
from megaflow.storage.abstract import Transition
from megaflow.storage.lease import DriverLease, Lease, dead_here, new_owner
from megaflow.storage.outage import Faults, Outage
from megaflow.storage.retrying import RetryingMetadataStore
from megaflow.storage.sqlite import SqliteMetadataStore
from tests.storage.conftest import Backend


async def test_a_claim_holds_until_released(backend: Backend) -> None:
    async with backend.open() as store:
        assert await store.get_lease("r1") is None
        t0 = time.time()
        lease = await store.claim_lease("r1", "a", 30)
        assert (lease.run_id, lease.owner) == ("r1", "a")
        assert t0 + 29 < lease.expires_at < time.time() + 31
        assert await store.get_lease("r1") == lease
        with pytest.raises(AlreadyExists, match=r"run r1 is driven by another process \(a\)"):
            await store.claim_lease("r1", "b", 30)
        assert await store.get_lease("r1") == lease  # the refused claim changed nothing
        assert (await store.claim_lease("r2", "b", 30)).owner == "b"  # one lease per run
        await store.release_lease("r1", "b")  # not the holder: nothing happens
        assert await store.get_lease("r1") == lease
        await store.release_lease("r1", "a")
        assert await store.get_lease("r1") is None
        assert (await store.claim_lease("r1", "b", 30)).owner == "b"


async def test_renewal_extends_and_an_ended_lease_is_taken_over(backend: Backend) -> None:
    async with backend.open() as store:
        first = await store.claim_lease("r1", "a", 0.5)
        await asyncio.sleep(0.05)
        renewed = await store.claim_lease("r1", "a", 0.5)
        assert renewed.owner == "a"
        assert renewed.expires_at > first.expires_at
        with pytest.raises(AlreadyExists, match="its lease ends at"):
            await store.claim_lease("r1", "b", 0.5)
        await asyncio.sleep(0.6)  # a's lease ends unrenewed: a crashed or froze
        assert (await store.claim_lease("r1", "b", 30)).owner == "b"
        with pytest.raises(AlreadyExists, match=r"\(b\)"):  # a, back, has lost it
            await store.claim_lease("r1", "a", 0.5)


async def test_of_many_claimants_at_once_exactly_one_wins(backend: Backend) -> None:
    stores = [backend.open() for _ in range(4)]
    for s in stores:
        await s.start()
    try:
        outcomes = await asyncio.gather(
            *(s.claim_lease("r1", f"o{i}", 30) for i, s in enumerate(stores) for _ in range(3)),
            return_exceptions=True,
        )
        won = {o.owner for o in outcomes if isinstance(o, Lease)}
        assert len(won) == 1, outcomes
        assert all(isinstance(o, Lease | AlreadyExists) for o in outcomes), outcomes
        held = await stores[0].get_lease("r1")
        assert held is not None
        assert held.owner in won
    finally:
        for s in stores:
            await s.stop()


async def test_a_lease_outlives_the_store_process(backend: Backend) -> None:
    async with backend.open() as store:
        await store.claim_lease("r1", "a", 30)
    async with backend.open() as again:  # as a second process opening the same store
        with pytest.raises(AlreadyExists):
            await again.claim_lease("r1", "b", 30)


# -- the retrying wrapper and the keeper ------------------------------------------------
def outage() -> Outage:
    return Outage("metadata", "test", Faults(), deadline_s=5, base_s=0.05, max_s=0.1)


async def test_the_retrying_store_delegates_the_lease(tmp_path: Path) -> None:
    async with RetryingMetadataStore(SqliteMetadataStore(tmp_path / "m.db"), outage()) as store:
        assert (await store.claim_lease("r1", "a", 30)).owner == "a"
        with pytest.raises(AlreadyExists, match=r"\(a\)"):
            await store.claim_lease("r1", "b", 30)
        assert (await store.get_lease("r1") or Lease("", "", 0)).owner == "a"
        await store.release_lease("r1", "a")
        assert await store.get_lease("r1") is None


class Freezable(SqliteMetadataStore):
    """A store whose lease claims hang while ``frozen`` is set: a driver that
    cannot renew (frozen, or cut off) for as long as the test wants."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.thawed = asyncio.Event()
        self.thawed.set()

    async def claim_lease(
        self, run_id: str, owner: str, ttl_s: float, *, replaces: str | None = None
    ) -> Lease:
        await self.thawed.wait()
        return await super().claim_lease(run_id, owner, ttl_s, replaces=replaces)


async def test_the_keeper_renews_refuses_a_second_and_releases(tmp_path: Path) -> None:
    async with SqliteMetadataStore(tmp_path / "m.db") as store:
        async with DriverLease(store, "r1", 0.3) as first:
            await asyncio.sleep(1.0)  # past three ttls: renewed all along
            with pytest.raises(AlreadyExists, match=first.owner):
                await DriverLease(store, "r1", 0.3).start()
            held = await store.get_lease("r1")
            assert held is not None
            assert held.owner == first.owner
        assert await store.get_lease("r1") is None  # released on stop
        async with DriverLease(store, "r1", 0.3):
            pass


async def test_a_keeper_that_could_not_renew_learns_it_lost_the_run(tmp_path: Path) -> None:
    async with (
        Freezable(tmp_path / "m.db") as frozen,
        SqliteMetadataStore(tmp_path / "m.db") as other,
    ):
        keeper = DriverLease(frozen, "r1", 0.3)
        await keeper.start()
        try:
            frozen.thawed.clear()
            await asyncio.sleep(0.5)  # the lease ended unrenewed
            taker = new_owner()
            await other.claim_lease("r1", taker, 30)
            frozen.thawed.set()
            err = await asyncio.wait_for(keeper.lost(), 2)
            assert "lost the driver lease of run r1" in str(err)
            assert taker in str(err)
        finally:
            await keeper.stop()
        held = await other.get_lease("r1")
        assert held is not None
        assert held.owner == taker


async def test_a_keeper_asked_at_once_says_whether_another_took_the_run(tmp_path: Path) -> None:
    """A driver woken from a freeze can fail on the new driver's writes before its
    renewer runs: ``confirm`` renews at once, and names the lost lease as the cause."""
    async with SqliteMetadataStore(tmp_path / "m.db") as store:
        keeper = DriverLease(store, "r1", 0.3)
        await keeper.start()
        try:
            assert await keeper.confirm() is None  # still ours: the failure stands
            assert keeper._renewer is not None
            keeper._renewer.cancel()  # frozen: no renewal runs
            await asyncio.sleep(0.5)
            taker = new_owner()
            await store.claim_lease("r1", taker, 30)
            err = await keeper.confirm()
            assert err is not None
            assert "lost the driver lease of run r1" in str(err)
            assert taker in str(err)
            assert await asyncio.wait_for(keeper.lost(), 1) is err
        finally:
            await keeper.stop()
        held = await store.get_lease("r1")
        assert held is not None
        assert held.owner == taker  # the loser's stop leaves the taker's lease alone


async def test_a_fenced_store_takes_no_write_from_a_driver_that_lost_the_run(
    tmp_path: Path,
) -> None:
    """The attacker is a driver frozen past its lease while another process took the
    run over and moved its task on. Woken, its renewer has not run yet, and its
    first act is a write from before the freeze. Unfenced it lands (the new driver's
    task is moved back); fenced it is refused with the lost-lease error."""
    async with RetryingMetadataStore(SqliteMetadataStore(tmp_path / "m.db"), outage()) as store:
        await store.create_run(RunSpec(id="r1"))
        await store.add_tasks([TaskSpec(id="r1/t", run_id="r1")])
        keeper = DriverLease(store, "r1", 0.3)
        await keeper.start()
        try:
            assert keeper._renewer is not None
            keeper._renewer.cancel()  # frozen
            await asyncio.sleep(0.5)
            taker = new_owner()
            await store.claim_lease("r1", taker, 30)
            stale = [Transition("r1/t", TaskState.CANCELLED, TaskState.QUEUED)]
            store.fence = keeper.fence
            with pytest.raises(StorageError, match="lost the driver lease of run r1"):
                await store.transition_many(stale)
            assert (await store.get_task("r1/t")).state is TaskState.QUEUED  # untouched
            store.fence = None
            await store.transition_many(stale)  # the unfenced write the fence refused
            assert (await store.get_task("r1/t")).state is TaskState.CANCELLED
        finally:
            await keeper.stop()


async def test_a_fence_costs_nothing_while_the_lease_is_fresh(tmp_path: Path) -> None:
    async with SqliteMetadataStore(tmp_path / "m.db") as store:
        clock = [1000.0]
        keeper = DriverLease(store, "r1", 30, clock=lambda: clock[0])
        await keeper.start()
        try:
            assert keeper.lease is not None
            keeper.lease = Lease("r1", keeper.owner, 1030.0)
            await keeper.fence()
            assert keeper.lease.expires_at == 1030.0  # no renewal asked for
            clock[0] = 1025.0  # the renewer is late: the fence renews first
            await keeper.fence()
            assert keeper.lease.expires_at > 1030.0
        finally:
            await keeper.stop()


async def test_owner_ids_differ_per_keeper() -> None:
    assert new_owner() != new_owner()


async def test_a_claim_replaces_only_the_named_holder(backend: Backend) -> None:
    async with backend.open() as store:
        await store.claim_lease("r1", "dead", 30)
        with pytest.raises(AlreadyExists, match=r"\(dead\)"):
            await store.claim_lease("r1", "b", 30, replaces="someone-else")
        assert (await store.claim_lease("r1", "b", 30, replaces="dead")).owner == "b"
        with pytest.raises(AlreadyExists, match=r"\(b\)"):  # b's lease is b's now
            await store.claim_lease("r1", "c", 30, replaces="dead")


async def test_a_dead_driver_of_this_host_is_taken_over_at_once(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    here = f"{socket.gethostname()}:{gone.pid}:0000"
    elsewhere = f"other-host.invalid:{gone.pid}:0000"
    assert dead_here(here)
    assert not dead_here(f"{socket.gethostname()}:{os.getpid()}:0000")  # alive
    assert not dead_here(elsewhere)  # cannot be seen from here: wait for its lease
    async with SqliteMetadataStore(tmp_path / "m.db") as store:
        await store.claim_lease("r1", here, 30)
        async with DriverLease(store, "r1", 30) as keeper:
            assert (await store.get_lease("r1") or Lease("", "", 0)).owner == keeper.owner
        await store.claim_lease("r1", elsewhere, 30)
        with pytest.raises(AlreadyExists, match=r"other-host\.invalid"):
            await DriverLease(store, "r1", 30).start()

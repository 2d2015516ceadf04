"""The state writer's events: published after the flush, built only for a listener."""

from collections.abc import Sequence

import pytest

from megaflow.core.errors import LeaseLost
from megaflow.core.events import CapacityFreed, Event
from megaflow.core.states import TaskState
from megaflow.core.tasks import RunSpec, TaskSpec
from megaflow.scheduler.writer import StateWriter
from megaflow.storage.abstract import Transition
from megaflow.storage.memory_bus import MemoryEventBus
from megaflow.storage.memory_metadata import MemoryMetadataStore


async def _writer() -> tuple[StateWriter, MemoryMetadataStore, MemoryEventBus]:
    store, bus = MemoryMetadataStore(), MemoryEventBus()
    await store.start()
    await store.create_run(RunSpec(id="r"))
    await store.add_tasks([TaskSpec(id="t", run_id="r")])
    return StateWriter(store, bus), store, bus


def _freed(instance: str) -> Event:
    return CapacityFreed(instance=instance)


async def test_an_announced_event_is_built_only_when_someone_listens() -> None:
    writer, _, bus = await _writer()
    built: list[str] = []

    def build(name: str) -> Event:
        built.append(name)
        return CapacityFreed(instance=name)

    writer.announce("capacity_freed", build, "nobody")
    await writer.flush()
    assert built == []
    sub = await bus.subscribe(["capacity_freed"])
    writer.announce("capacity_freed", build, "someone")
    await writer.flush()
    assert built == ["someone"]
    got = await sub.get(1)
    assert isinstance(got, CapacityFreed)
    assert got.instance == "someone"


async def test_a_subscriber_joining_before_the_flush_gets_the_event() -> None:
    # Subscribe, then read the store (as app/groups.py does): a change buffered
    # before the subscription must still be announced once it is stored.
    writer, store, bus = await _writer()
    writer.start()
    try:
        writer.transition(Transition("t", TaskState.CANCELLED))
        writer.announce("capacity_freed", _freed, "i")
        sub = await bus.subscribe(["capacity_freed"])
        got = await sub.get(1)
        assert isinstance(got, CapacityFreed)
        assert got.instance == "i"
        assert (await store.get_task("t")).state is TaskState.CANCELLED
    finally:
        await writer.stop()


async def test_a_write_refused_for_a_lost_lease_is_one_line_not_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A driver woken after another took its run over: its writes are refused by the
    lease's fence. That is the run's end for this process, said once, without the
    traceback of an unexpected failure, and no change is applied one by one."""
    writer, _, _ = await _writer()

    class Lost(MemoryMetadataStore):
        async def transition_many(self, transitions: Sequence[Transition]) -> None:
            raise LeaseLost("this process lost the driver lease of run r")

    lost = Lost()
    await lost.start()
    writer.store = lost
    writer.start()
    try:
        writer.transition(Transition("t", TaskState.CANCELLED, TaskState.QUEUED))
        await writer.flush()
    finally:
        await writer.stop()
    refused = [r for r in caplog.records if "lost the driver lease" in r.getMessage()]
    assert len(refused) == 1, [r.getMessage() for r in caplog.records]
    assert refused[0].exc_info is None
    assert not any("one by one" in r.getMessage() for r in caplog.records)

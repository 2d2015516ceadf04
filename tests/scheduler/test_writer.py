"""The state writer's events: published after the flush, built only for a listener."""

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

"""In-process queue specifics; the shared behaviour is in test_queue_contract.py."""

from megaflow.core.tasks import TaskSpec
from megaflow.storage.abstract import QueuedTask
from megaflow.storage.memory_queue import MemoryTaskQueue


def item(i: int, priority: int) -> QueuedTask:
    return QueuedTask(spec=TaskSpec(id=f"t{i}", run_id="r", priority=priority), seq=i)


async def test_len_counts_live_entries() -> None:
    q = MemoryTaskQueue()
    await q.push([item(1, 0), item(1, 0), item(2, 5)])
    assert len(q) == 2
    await q.pop(5)
    assert len(q) == 0


async def test_lazy_removal_compacts_the_heap() -> None:
    q = MemoryTaskQueue()
    await q.push([item(i, 0) for i in range(300)])
    assert await q.remove(f"t{i}" for i in range(250)) == 250
    assert len(q._heap) <= 2 * len(q) + 64  # removed entries do not pile up
    assert [i.task_id for i in await q.pop(2)] == ["t250", "t251"]

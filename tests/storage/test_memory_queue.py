from hypothesis import given, settings
from hypothesis import strategies as st

from megaflow.core.tasks import TaskSpec
from megaflow.storage.abstract import QueuedTask
from megaflow.storage.memory_queue import MemoryTaskQueue


def item(i: int, priority: int) -> QueuedTask:
    return QueuedTask(spec=TaskSpec(id=f"t{i}", run_id="r", priority=priority), seq=i)


@settings(max_examples=200, deadline=None)
@given(prios=st.lists(st.integers(-5, 5), max_size=60), removed=st.sets(st.integers(0, 59)))
async def test_pops_by_priority_then_arrival(prios: list[int], removed: set[int]) -> None:
    q = MemoryTaskQueue()
    await q.push([item(i, p) for i, p in enumerate(prios)])
    found = await q.remove(f"t{i}" for i in removed)
    assert found == len([i for i in removed if i < len(prios)])
    expected = sorted(((-p, i) for i, p in enumerate(prios) if i not in removed))
    got = []
    while await q.size():
        (it,) = await q.pop()
        got.append((-it.spec.priority, it.seq))
    assert got == expected
    assert await q.pop() == []


async def test_push_twice_queues_once_and_peek_does_not_consume() -> None:
    q = MemoryTaskQueue()
    await q.push([item(1, 0), item(1, 0), item(2, 5)])
    assert await q.size() == 2
    assert [i.task_id for i in await q.peek(5)] == ["t2", "t1"]
    assert [i.task_id for i in await q.pop(5)] == ["t2", "t1"]
    assert len(q) == 0


async def test_removed_then_pushed_again_is_queued() -> None:
    q = MemoryTaskQueue()
    await q.push([item(1, 0)])
    await q.remove(["t1"])
    await q.push([item(1, 3)])
    (it,) = await q.pop()
    assert it.spec.priority == 3
    assert await q.pop() == []

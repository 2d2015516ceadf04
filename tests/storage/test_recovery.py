from megaflow.core.states import TaskState as S
from megaflow.core.tasks import ErrorKind, TaskResult
from megaflow.storage.abstract import Transition
from megaflow.storage.memory_queue import MemoryTaskQueue
from megaflow.storage.recovery import recover_queue
from megaflow.storage.sqlite import SqliteMetadataStore
from tests.storage.conftest import make_tasks


async def test_restart_requeues_every_non_terminal_task(store: SqliteMetadataStore) -> None:
    await store.add_tasks(make_tasks("r1", 7))
    path = {
        "r1/t0": [],  # queued
        "r1/t1": [S.SCHEDULED],
        "r1/t2": [S.SCHEDULED, S.STARTING, S.RUNNING],
        "r1/t3": [S.SCHEDULED, S.STARTING, S.RUNNING, S.GRADING, S.SUCCEEDED],
        "r1/t4": [S.CANCELLED],
        "r1/t5": [S.SCHEDULED, S.PREEMPTED],
        "r1/t6": [S.SCHEDULED, S.RETRYING],
    }
    await store.transition_many([Transition(t, s) for t, states in path.items() for s in states])
    await store.put_result(TaskResult(task_id="r1/t3", success=True, reward=1))

    queue = MemoryTaskQueue()  # a fresh process: the old queue is gone
    report = await recover_queue(store, queue)
    assert report.lost_in_flight == 2
    assert report.requeued == 5
    queued = {i.task_id for i in await queue.pop(100)}
    assert queued == {"r1/t0", "r1/t1", "r1/t2", "r1/t5", "r1/t6"}
    assert (await store.get_task("r1/t3")).state is S.SUCCEEDED
    assert (await store.get_task("r1/t4")).state is S.CANCELLED
    (lost,) = await store.list_attempts("r1/t2")
    assert lost.error_kind is ErrorKind.INFRA_LOST
    assert (await store.get_task("r1/t2")).attempts == 1

    again = await recover_queue(store, MemoryTaskQueue())  # idempotent: nothing new is lost
    assert (again.requeued, again.lost_in_flight) == (5, 0)

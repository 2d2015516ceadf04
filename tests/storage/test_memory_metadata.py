"""The in-memory metadata store beyond the shared contract: copies out, shared databases."""

from megaflow.core.states import TaskState
from megaflow.core.tasks import RunSpec, TaskResult
from megaflow.storage.abstract import Transition
from megaflow.storage.config import StorageConfig
from megaflow.storage.memory_metadata import MemoryDatabase, MemoryMetadataStore
from tests.storage.conftest import make_tasks


async def test_what_a_read_returns_is_a_copy() -> None:
    async with MemoryMetadataStore() as store:
        await store.create_run(RunSpec(id="r1"))
        await store.add_tasks(make_tasks("r1", 1))
        await store.put_result(TaskResult(task_id="r1/t0", metrics={"steps": 1.0}))
        rec = await store.get_task("r1/t0")
        rec.spec.payload["x"] = 1
        rec.state = TaskState.FAILED
        got = await store.get_result("r1/t0")
        got.metrics["steps"] = 9.0
        again = await store.get_task("r1/t0")
        assert again.spec.payload == {}
        assert again.state is TaskState.QUEUED
        assert (await store.get_result("r1/t0")).metrics == {"steps": 1.0}


async def test_stores_on_one_database_see_each_other_and_stopping_keeps_it() -> None:
    db = MemoryDatabase()
    async with MemoryMetadataStore(db) as a, MemoryMetadataStore(db) as b:
        await a.create_run(RunSpec(id="r1"))
        await a.add_tasks(make_tasks("r1", 2))
        await b.transition_many([Transition("r1/t1", TaskState.SCHEDULED)])
        assert await a.count_by_state("r1") == {TaskState.QUEUED: 1, TaskState.SCHEDULED: 1}
    async with MemoryMetadataStore(db) as c:
        assert [r.seq for r in await c.list_tasks("r1")] == [1, 2]


def test_the_config_builds_it() -> None:
    cfg = StorageConfig.model_validate({"metadata": {"type": "memory"}})
    assert isinstance(cfg.metadata.build(), MemoryMetadataStore)

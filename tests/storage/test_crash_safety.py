"""A writer killed with SIGKILL in the middle of its batches leaves a consistent store."""

import asyncio
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from megaflow.core.states import TaskState
from megaflow.storage.memory_queue import MemoryTaskQueue
from megaflow.storage.recovery import recover_queue
from megaflow.storage.sqlite import SqliteMetadataStore

BATCH = 200
WRITER = textwrap.dedent(
    f"""
    import asyncio, sys
    from megaflow.core.states import TaskState as S
    from megaflow.core.tasks import RunSpec, TaskSpec
    from megaflow.storage.abstract import Transition
    from megaflow.storage.sqlite import SqliteMetadataStore

    async def main(path):
        async with SqliteMetadataStore(path) as store:
            await store.create_run(RunSpec(id="r"))
            for b in range(10_000):
                ids = [f"r/b{{b}}-{{i}}" for i in range({BATCH})]
                await store.add_tasks([TaskSpec(id=i, run_id="r") for i in ids])
                for dst in (S.SCHEDULED, S.STARTING, S.RUNNING):
                    await store.transition_many([Transition(i, dst) for i in ids])
                if b == 2:
                    print("ready", flush=True)

    asyncio.run(main(sys.argv[1]))
    """
)


@pytest.mark.parametrize("delay", [0.05, 0.2, 0.45])
async def test_sigkill_mid_batch_leaves_no_half_written_batch(tmp_path: Path, delay: float) -> None:
    db = tmp_path / "crash.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        await asyncio.sleep(delay)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    async with SqliteMetadataStore(db) as store:
        tasks = await store.list_tasks("r")
        assert len(tasks) >= 3 * BATCH
        assert len(tasks) % BATCH == 0, "a batch of inserts was half written"
        groups: dict[str, set[TaskState]] = {}
        for rec in tasks:
            groups.setdefault(rec.id.split("-")[0], set()).add(rec.state)
        assert all(len(states) == 1 for states in groups.values()), "a batch was half applied"

        # and the run can be picked up again: everything in flight is re-queued
        queue = MemoryTaskQueue()
        report = await recover_queue(store, queue, "r")
        assert report.requeued == len(tasks) == await queue.size()
        assert await store.count_by_state("r") == {TaskState.QUEUED: len(tasks)}

"""The books of a run, read back from its metadata store, and the checks every
reliability test makes on them: each task ends in exactly one terminal state,
with exactly one result, and its attempts are numbered without gap."""

from __future__ import annotations

import sqlite3
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from megaflow.core.states import TaskState
from megaflow.core.tasks import Attempt, ErrorKind, TaskRecord, TaskResult
from megaflow.storage.abstract import MetadataStore
from megaflow.storage.sqlite import SqliteMetadataStore

TERMINAL = (TaskState.SUCCEEDED, TaskState.FAILED, TaskState.TIMED_OUT, TaskState.CANCELLED)


@dataclass
class Ledger:
    tasks: dict[str, TaskRecord]
    results: dict[str, TaskResult]
    attempts: dict[str, list[Attempt]]

    @property
    def states(self) -> Counter[TaskState]:
        return Counter(r.state for r in self.tasks.values())

    def attempts_of_kind(self, kind: ErrorKind | None) -> int:
        return sum(a.error_kind is kind for atts in self.attempts.values() for a in atts)

    @property
    def retries(self) -> int:
        """Attempts after the first, over all tasks."""
        return sum(len(a) - 1 for a in self.attempts.values() if a)


async def read_ledger(md: MetadataStore, run_id: str) -> Ledger:
    tasks = {r.id: r for r in await md.list_tasks(run_id)}
    results: dict[str, TaskResult] = {}
    for res in await md.list_results(run_id):
        assert res.task_id not in results, f"two results for task {res.task_id}"
        results[res.task_id] = res
    attempts = {tid: await md.list_attempts(tid) for tid in tasks}
    return Ledger(tasks, results, attempts)


async def ledger_of(db: Path, run_id: str) -> Ledger:
    """The books of a run in a SQLite file another process wrote."""
    md = SqliteMetadataStore(db)
    async with md:
        return await read_ledger(md, run_id)


def check_ledger(led: Ledger, submitted: int) -> None:
    """Every task terminal, exactly once, with one result; the counts add up."""
    assert len(led.tasks) == submitted
    states = led.states
    not_terminal = {s: n for s, n in states.items() if not s.terminal}
    assert not not_terminal, f"tasks not in a terminal state: {not_terminal}"
    assert sum(states[s] for s in TERMINAL) == submitted, states
    assert set(led.results) == set(led.tasks), "a task without a result, or a stray result"
    for tid, rec in led.tasks.items():
        numbers = [a.number for a in led.attempts[tid]]
        assert numbers == list(range(1, len(numbers) + 1)), (tid, numbers)
        assert rec.attempts == len(numbers), (tid, rec.attempts, numbers)
        res = led.results[tid]
        if rec.state is TaskState.SUCCEEDED:
            # graded; an agent's own failure is a sample with reward 0 and its error
            assert res.error_kind in (None, ErrorKind.AGENT), (tid, res)
            if res.error_kind is ErrorKind.AGENT:
                assert (res.success, res.reward) == (False, 0.0), (tid, res)
                assert res.error, f"task {tid}: an agent failure without its error"
        else:
            assert res.error, f"task {tid} ended {rec.state} without an error message"


def integrity_check(db: Path) -> str:
    """SQLite's own consistency check of a metadata database ("ok" when sound)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()

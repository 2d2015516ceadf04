"""Finished GRPO groups of a running job, yielded as each one completes.

::

    async with Job(cfg) as job:                      # cfg.task_type: train, samples: n
        await job.submit()
        async for group in finished_groups(job, job.run_id):
            usable = group.usable                    # masked samples left out
            trainer.step(usable)

Signature (stable)::

    async def finished_groups(
        job: Job, run_id: str, *, tasks: Collection[str] | None = None
    ) -> AsyncIterator[Group]

A group is the samples of one task (:func:`megaflow.core.tasks.group_id`:
``<run>/<task>``, the sample ids ``<run>/<task>/<n>`` less their ``/<n>``).
It is yielded once every one of its samples has reached a terminal state,
in the order groups complete; the iterator ends when every group watched has
been yielded. ``tasks`` restricts the watch to those sample ids (already
submitted); by default it is every task the run has when the call starts.

:class:`Group.samples` holds every sample of the group once, as a
:class:`~megaflow.train.samples.TrainingSample`. A sample without a usable
episode (its task did not end SUCCEEDED: an infrastructure failure past its
retries, a deadline, a cancellation; or a trajectory that fails the token
check) is ``masked=True`` with no tokens and a NaN reward, and
:attr:`Group.problems` says why, by sample id. An agent's own failure
(malformed answers, a model error) is not masked: it is a sample with
reward 0, as the policy earned it.

How it waits: it subscribes to the job's event bus for ``task_finished``
(published after the result is in the metadata store) before reading which
tasks are already terminal, so no completion is missed; a background reader
drains the subscription at once, so a consumer that trains between groups
never blocks the scheduler's publisher.

Rounds: one long-lived :class:`~megaflow.app.job.Job` takes a batch of
tasks per training step through :meth:`Job.submit_tasks` (a second
submission to the same run is supported by the scheduler; sample ids must
be new, e.g. ``sample_id(run, f"step{k}.{task}", n)``). Call
``finished_groups(job, run_id, tasks=[t.id for t in batch])`` per round, so
only that round's groups are watched and earlier ones are not yielded again.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator, Collection
from dataclasses import dataclass, field

from megaflow.app.job import Job
from megaflow.app.training_data import stored_sample
from megaflow.core.errors import Cancelled, InvalidInput, NotFound
from megaflow.core.events import TaskFinished
from megaflow.core.tasks import TaskRecord, TaskResult, group_id
from megaflow.storage.abstract import Subscription
from megaflow.train.samples import TrainingSample


@dataclass
class Group:
    """The samples of one task, all terminal."""

    group_id: str
    run_id: str
    samples: list[TrainingSample]
    problems: dict[str, str] = field(default_factory=dict)
    """Why a sample is masked (no graded result, or no token-exact episode), by sample id."""

    @property
    def usable(self) -> list[TrainingSample]:
        """The samples a trainer may use: not masked."""
        return [s for s in self.samples if not s.masked]

    @property
    def rewards(self) -> list[float]:
        """Rewards of the usable samples (the group's statistics take only these)."""
        return [s.reward for s in self.usable if not math.isnan(s.reward)]


async def _drain(sub: Subscription, run_id: str, out: asyncio.Queue[str | None]) -> None:
    try:
        async for event in sub:
            if isinstance(event, TaskFinished) and event.run_id == run_id:
                out.put_nowait(event.task_id)
    finally:
        out.put_nowait(None)  # the subscription ended: the job is stopping


async def _group(job: Job, gid: str, run_id: str, members: list[str]) -> Group:
    md = job.stores.metadata
    samples: list[TrainingSample] = []
    problems: dict[str, str] = {}
    for tid in members:
        rec = await md.get_task(tid)
        res: TaskResult | None
        try:
            res = await md.get_result(tid)
        except NotFound:
            res = None
        stored = await stored_sample(job.stores.artifacts, rec, res)
        if stored.problem:
            problems[tid] = stored.problem
        samples.append(stored.as_training_sample())
    return Group(group_id=gid, run_id=run_id, samples=samples, problems=problems)


async def _records(job: Job, run_id: str, tasks: Collection[str] | None) -> list[TaskRecord]:
    md = job.stores.metadata
    await md.get_run(run_id)  # NotFound for an unknown run
    records = await md.list_tasks(run_id)
    if tasks is None:
        return records
    wanted = set(tasks)
    found = [r for r in records if r.id in wanted]
    missing = wanted - {r.id for r in found}
    if missing:
        raise InvalidInput(
            f"finished_groups: run {run_id} has no task(s) {', '.join(sorted(missing)[:5])}; "
            "submit them before watching them"
        )
    return found


async def finished_groups(
    job: Job, run_id: str, *, tasks: Collection[str] | None = None
) -> AsyncIterator[Group]:
    """Yield each group of ``run_id`` (or of the sample ids ``tasks``) once all its
    samples are terminal; end when every watched group has been yielded."""
    done: asyncio.Queue[str | None] = asyncio.Queue()
    sub = await job.stores.events.subscribe(["task_finished"])
    reader = asyncio.create_task(_drain(sub, run_id, done))
    try:
        records = await _records(job, run_id, tasks)
        members: dict[str, list[str]] = {}
        group_of: dict[str, str] = {}
        pending: dict[str, set[str]] = {}
        for rec in records:
            gid = group_id(rec.spec)
            members.setdefault(gid, []).append(rec.id)
            group_of[rec.id] = gid
            if not rec.state.terminal:
                pending.setdefault(gid, set()).add(rec.id)
        for gid in [g for g in members if g not in pending]:
            yield await _group(job, gid, run_id, members[gid])
        while pending:
            tid = await done.get()
            if tid is None:
                raise Cancelled(
                    f"finished_groups: the job's events ended with {len(pending)} group(s) "
                    f"of run {run_id} unfinished (was the job stopped?)"
                )
            owner = group_of.get(tid)
            if owner is None or owner not in pending:
                continue
            pending[owner].discard(tid)
            if not pending[owner]:
                del pending[owner]
                yield await _group(job, owner, run_id, members[owner])
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
        await sub.close()

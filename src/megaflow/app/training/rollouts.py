"""A step's rollouts: one batch of tasks in the job's run, read back as GRPO groups.

:meth:`Rollouts.submit` queues ``samples`` tasks of every prompt of a batch
in the job's run (typed ``train``; held-out rounds ``eval``), with sample
ids that name the process (its incarnation), the round and the instance:
``<run>/<incarnation>.s00003.<instance>/<n>``. The scheduler runs them like
any task: sandbox, agent against the rollout model, grading in a fresh
sandbox. :meth:`Rollouts.collect` waits for the batch's groups
(:func:`megaflow.app.groups.finished_groups`) and returns them in the
batch's prompt order; :meth:`Rollouts.scores` waits for a held-out round and
reads its graded rewards. A sample lost to the infrastructure is masked (no
reward, out of its group's statistics and of the held-out mean); an agent's
own failure is a sample with reward 0. An episode whose model replica died
after answering it (``ReplicaLost``) is an infrastructure failure: the
scheduler runs it again from its first turn as a new attempt of the same
task (up to ``max_attempts``), and its sample is read from the attempt that
finished, so it is neither lost nor counted twice.

A resumed process is a new incarnation, so its ids never meet those of the
process it replaces; that one's unfinished tasks stay as they were left.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from megaflow.app.groups import finished_groups
from megaflow.app.job import Job
from megaflow.core.errors import NotFound
from megaflow.core.tasks import TaskSpec, TaskType, Timeouts, sample_id
from megaflow.datasets.instance import SWEInstance
from megaflow.datasets.task_specs import to_task_specs
from megaflow.grading.reward import sample_reward
from megaflow.train.samples import TrainingSample


@dataclass
class Batch:
    """The groups of one round, in the order of its prompts."""

    groups: list[list[TrainingSample]]
    problems: dict[str, str] = field(default_factory=dict)
    """Why a sample is masked, by sample id (:attr:`Group.problems`)."""

    @property
    def rewards(self) -> list[float]:
        return [s.reward for g in self.groups for s in g if not s.masked]

    @property
    def masked(self) -> int:
        return sum(1 for g in self.groups for s in g if s.masked)

    @property
    def reward_mean(self) -> float:
        r = [x for x in self.rewards if not math.isnan(x)]
        return sum(r) / len(r) if r else 0.0

    @property
    def reward_std(self) -> float | None:
        """Population std of the graded rewards (the spread the dashboard draws); None: none."""
        r = [x for x in self.rewards if not math.isnan(x)]
        return statistics.pstdev(r) if r else None


def round_name(incarnation: str, step: int, *, held_out: bool = False) -> str:
    return f"{incarnation}.{'e' if held_out else 's'}{step:05d}"


class Rollouts:
    def __init__(self, job: Job, incarnation: str) -> None:
        self.job = job
        self.incarnation = incarnation
        self._ids: dict[str, list[str]] = {}

    async def submit(
        self,
        name: str,
        instances: Sequence[SWEInstance],
        samples: int,
        task_type: TaskType,
        priority: int = 0,
        temperature: float | None = None,
    ) -> list[str]:
        """Queue round ``name``: ``samples`` tasks of each instance, and return their ids.
        Held-out rounds take ``priority`` 1, so they run before queued rollouts of later
        steps; ``temperature`` overrides the agent's sampling for these tasks."""
        cfg, run = self.job.cfg, self.job.run_id
        specs = to_task_specs(
            instances, run, samples, task_type, priority=cfg.priority + priority,
            max_attempts=cfg.max_attempts, timeouts=Timeouts(deadline_s=cfg.deadline_s),
        )  # fmt: skip
        own = {} if temperature is None else {"megaflow_sampling": {"temperature": temperature}}
        specs = [
            s.model_copy(
                update={
                    "id": sample_id(run, f"{name}.{s.payload['instance_id']}", s.sample),
                    "payload": {**s.payload, **own},
                }
            )
            for s in specs
        ]
        self._ids[name] = [s.id for s in specs]
        await self.job.submit_tasks(specs)
        return [s.id for s in specs]

    async def submit_specs(self, name: str, specs: Sequence[TaskSpec]) -> list[str]:
        """Queue round ``name`` made of ``specs`` as given (a mixed run's tasks, which
        are not all SWE-bench instances; :mod:`megaflow.app.training.mixed`)."""
        self._ids[name] = [s.id for s in specs]
        await self.job.submit_tasks(list(specs))
        return list(self._ids[name])

    async def scores(self, name: str) -> tuple[list[float], int]:
        """Wait for round ``name`` (a held-out one, whose trajectories keep no tokens);
        the rewards of its graded samples, and how many were lost to the infrastructure."""
        ids = self._ids.pop(name)
        async for _ in finished_groups(self.job, self.job.run_id, tasks=ids):
            pass
        md = self.job.stores.metadata
        rewards: list[float] = []
        for tid in ids:
            rec = await md.get_task(tid)
            try:
                res = await md.get_result(tid)
            except NotFound:
                continue
            reward = sample_reward(rec.state, res)  # the agent's own failure is a 0
            if reward is not None:
                rewards.append(reward)
        return rewards, len(ids) - len(rewards)

    async def collect(self, name: str) -> Batch:
        """Wait for every group of round ``name``; its groups in prompt order."""
        ids = self._ids.pop(name)
        got, problems = {}, {}
        async for g in finished_groups(self.job, self.job.run_id, tasks=ids):
            got[g.group_id] = g.samples
            problems.update(g.problems)
        order = list(dict.fromkeys(i.rsplit("/", 1)[0] for i in ids))
        return Batch([got[g] for g in order], problems)

"""Stored samples as training data: what a run's finished tasks give a trainer.

:func:`load_samples` reads tasks' records, results and trajectories from the
stores and turns each into a :class:`StoredSample`, through
:func:`megaflow.train.samples.sample_from_trajectory` (the one place a
trajectory becomes a token sequence). It is shared by the finished-groups
feed (:mod:`megaflow.app.groups`) and the training export
(:mod:`megaflow.app.training_export`).

A sample is *masked* when its task did not end SUCCEEDED: an infrastructure
failure that outlived its retries, a task deadline, a cancellation. It has no
graded result, so it has no reward (``None``; never 0) and is left out of its
group's statistics. A sample that ran but whose trajectory gives no
token-exact sequence (:class:`~megaflow.train.samples.TokenDrift`: a backend
that records no token ids, a re-tokenized history, an agent that failed
before its first model call) keeps its reward and says why in ``problem``;
it is masked for training too, never silently dropped.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from megaflow.app.assembly import task_type
from megaflow.core.errors import NotFound
from megaflow.core.states import TaskState
from megaflow.core.tasks import TaskRecord, TaskResult, group_id
from megaflow.core.trajectory import Trajectory
from megaflow.grading.reward import sample_reward
from megaflow.storage.abstract import ArtifactStore, MetadataStore
from megaflow.train.samples import TokenDrift, TrainingSample, sample_from_trajectory


@dataclass(frozen=True)
class StoredSample:
    """One sample of a run as stored, with its token sequence when it has one."""

    sample_id: str
    group_id: str
    run_id: str
    task_type: str
    state: TaskState
    reward: float | None
    """The graded reward; ``None`` for a masked sample (it has none)."""
    masked: bool
    """No graded result (the task did not end SUCCEEDED): out of the group's statistics."""
    training: TrainingSample | None
    """The token-exact episode; ``None`` when masked or when ``problem`` says why not."""
    problem: str | None = None
    error_kind: str | None = None

    def as_training_sample(self) -> TrainingSample:
        """The sample for a trainer. One without a usable episode comes back masked,
        with no tokens and a NaN reward, so that no statistic can take it as a 0."""
        if self.training is not None and not self.masked:
            return self.training
        return TrainingSample(
            sample_id=self.sample_id,
            group_id=self.group_id,
            run_id=self.run_id,
            task_type=self.task_type,
            prompt_ids=[],
            completion_ids=[],
            logprobs=[],
            loss_mask=[],
            reward=float("nan"),
            masked=True,
        )


async def _trajectory(artifacts: ArtifactStore, res: TaskResult) -> Trajectory | str:
    key = res.artifacts.get("trajectory")
    if key is None:
        return "its result links no trajectory"
    try:
        return Trajectory.model_validate(json.loads(await artifacts.get(key)))
    except NotFound:
        return f"its trajectory {key} is not in the artifact store"
    except ValueError as exc:
        return f"its trajectory {key} is unreadable: {exc}"


async def stored_sample(
    artifacts: ArtifactStore, rec: TaskRecord, res: TaskResult | None
) -> StoredSample:
    """One task's sample from its record, its result and its trajectory."""
    spec = rec.spec
    kind = task_type(spec)[0].value
    gid = group_id(spec)
    error_kind = res.error_kind.value if res and res.error_kind else None

    def made(
        reward: float | None, training: TrainingSample | None, problem: str | None
    ) -> StoredSample:
        return StoredSample(
            sample_id=spec.id, group_id=gid, run_id=spec.run_id, task_type=kind,
            state=rec.state, reward=reward, masked=reward is None, training=training,
            problem=problem, error_kind=error_kind,
        )  # fmt: skip

    reward = sample_reward(rec.state, res)
    if reward is None or res is None:
        return made(
            None, None, (res.error if res else None) or rec.error or f"ended {rec.state.value}"
        )
    traj = await _trajectory(artifacts, res)
    if isinstance(traj, str):
        return made(reward, None, traj)
    kind = str(traj.meta.get("task_type", kind))
    try:
        sample = sample_from_trajectory(traj, reward, group_id=gid, task_type=kind)
    except TokenDrift as exc:
        why = str(exc) if kind == "train" else f"{exc} (a {kind} sample keeps no token data)"
        return made(reward, None, why)
    return made(reward, sample, None)


async def load_samples(
    metadata: MetadataStore, artifacts: ArtifactStore, run_id: str, ids: Sequence[str] | None = None
) -> list[StoredSample]:
    """The samples of a run (or only those of ``ids``), in submission order."""
    await metadata.get_run(run_id)  # NotFound for an unknown run
    if ids is None:
        records = await metadata.list_tasks(run_id)
    else:
        records = [await metadata.get_task(i) for i in ids]
    results = {r.task_id: r for r in await metadata.list_results(run_id)}
    return [await stored_sample(artifacts, rec, results.get(rec.id)) for rec in records]

"""The trajectory page's data: the steps, the outcome, the tokens decoded, the group, neighbours.

:func:`trajectory_view` reads a task's stored trajectory and adds what an
engineer debugging a rollout asks first: how it ended (outcome, reward, the
error message), the token sequence of a ``train`` sample with every id
decoded (through the tokenizer the run's config names, when one is found),
the group the sample belongs to with each sibling's reward and
advantage, and the previous and next trajectories of the run and of the
group. A task that ended without a result (timed out, failed on the
infrastructure) shows its last attempt's trajectory with the task's outcome
and error; an earlier, retried attempt shows its own. A trajectory without a
step (the attempt ended before the model's first answer: the model server
refused, the sandbox failed) says so and why (``no_turns``), rather than show
an empty list of turns.

The advantage shown is the run's own: the estimator its ``train.algorithm``
names, applied to the rewards of the sample's whole step
(:mod:`megaflow.dashboard.advantages`); the page names the estimator.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from megaflow.core.errors import NotFound
from megaflow.core.outcomes import ERROR_LABELS, is_error, outcome
from megaflow.core.states import TaskState
from megaflow.core.tasks import Attempt, ErrorKind, RunSpec, TaskRecord, TaskResult, group_id
from megaflow.core.trajectory import Trajectory
from megaflow.dashboard.advantages import run_estimator, step_advantages, step_of
from megaflow.dashboard.attempts import (
    attempt_rows,
    attempt_trajectories,
    tasks_with_trajectories,
)
from megaflow.dashboard.decoding import decode_ids
from megaflow.storage.abstract import ArtifactStore, MetadataStore
from megaflow.train.samples import TokenDrift, sample_from_trajectory


def _sample_view(run: RunSpec, traj: Trajectory, reward: float, task_type: str) -> dict[str, Any]:
    try:
        sample = sample_from_trajectory(
            traj, reward, group_id=str(traj.meta.get("group_id", traj.task_id)), task_type=task_type
        )
    except TokenDrift as exc:
        return {"problem": str(exc)}
    pieces, source = decode_ids(run.config, [*sample.prompt_ids, *sample.completion_ids])
    cut = len(sample.prompt_ids)
    return {
        "prompt_ids": sample.prompt_ids,
        "completion_ids": sample.completion_ids,
        "logprobs": sample.logprobs,
        "loss_mask": sample.loss_mask,
        "weights_version": sample.weights_version,
        "prompt_text": pieces[:cut] if pieces is not None else None,
        "completion_text": pieces[cut:] if pieces is not None else None,
        "decoded_by": source if pieces is not None else None,
        "not_decoded": None if pieces is not None else source,
    }


def _reward(rec: TaskRecord, res: TaskResult | None) -> float | None:
    return res.reward if res is not None and rec.state is TaskState.SUCCEEDED else None


def _around(ids: list[str], this: str) -> tuple[str | None, str | None]:
    """The ids before and after ``this`` in ``ids`` (None at either end, or when absent)."""
    at = ids.index(this) if this in ids else -1
    return (ids[at - 1] if at > 0 else None), (ids[at + 1] if 0 <= at < len(ids) - 1 else None)


async def _group_and_neighbours(
    meta: MetadataStore, artifacts: ArtifactStore, rec: TaskRecord, kind: str
) -> tuple[dict[str, Any] | None, dict[str, str | None]]:
    records = await meta.list_tasks(rec.spec.run_id)
    results = {r.task_id: r for r in await meta.list_results(rec.spec.run_id)}
    with_traj = await tasks_with_trajectories(artifacts, rec.spec.run_id, records, results)
    gid = group_id(rec.spec)
    kept = set(with_traj)
    siblings = [r.id for r in records if r.id in kept and group_id(r.spec) == gid]
    near: dict[str, str | None] = {}
    near["previous"], near["next"] = _around(with_traj, rec.id)
    near["group_previous"], near["group_next"] = _around(siblings, rec.id)
    if kind != "train":
        return None, near
    step = step_of(gid)
    groups: dict[str, list[TaskRecord]] = {gid: []}
    for r in records:  # the step's groups in submission order, this one among them
        g = group_id(r.spec)
        if g == gid or (step is not None and g.startswith(step) and r.spec.type is rec.spec.type):
            groups.setdefault(g, []).append(r)
    rewards = {g: [_reward(r, results.get(r.id)) for r in rs] for g, rs in groups.items()}
    config = (await meta.get_run(rec.spec.run_id)).config
    # torch's first import takes seconds: off the event loop, which serves every page
    est = await asyncio.to_thread(run_estimator, config)
    advs = await asyncio.to_thread(step_advantages, est, list(rewards.values()))
    mine = advs[list(groups).index(gid)] if advs is not None else [None] * len(groups[gid])
    rows = [
        {"task": r.id, "outcome": outcome(r.state, results.get(r.id)), "reward": rw,
         "advantage": adv, "this": r.id == rec.id, "has_trajectory": r.id in kept}
        for r, rw, adv in zip(groups[gid], rewards[gid], mine, strict=True)
    ]  # fmt: skip
    estimator = {"name": est.name, "formula": est.formula, "notes": est.notes,
                 "problem": est.problem, "step_groups": len(groups)}  # fmt: skip
    return {"id": gid, "estimator": estimator, "members": rows}, near


def _pick(
    res: TaskResult | None, tries: list[Attempt], keys: dict[int, str], attempt: int | None
) -> tuple[str | None, bool]:
    """The key of the trajectory to show, and whether it is the task's own (its last
    attempt's, whose outcome is the task's): attempt ``attempt``'s when asked, else the
    result's, else (a task that ended without one: timed out, failed) its last attempt's."""
    final = res.artifacts.get("trajectory") if res is not None else None
    last = max((a.number for a in tries), default=None)
    if attempt is not None:
        key = keys.get(attempt)
        return key, key is not None and (key == final or (final is None and attempt == last))
    if final is not None:
        return final, True
    if last is not None and last in keys:
        return keys[last], True
    return (keys[max(keys)], False) if keys else (None, False)


def _no_turns(traj: Trajectory, said: str, kind: str | None, error: str | None) -> str | None:
    """Why a trajectory holds no turn, in a sentence; None when it holds one. ``said`` is
    the outcome shown; for a retried attempt, ``kind`` its error kind names how it ended."""
    if traj.steps:
        return None
    how = ERROR_LABELS.get(ErrorKind(kind), kind) if kind else said
    why = f"{how} ({error})" if error else how
    return f"No turn was recorded: the attempt ended with {why} before the model answered."


async def trajectory_view(
    meta: MetadataStore, artifacts: ArtifactStore, task_id: str, attempt: int | None = None
) -> dict[str, Any]:
    """A task's stored trajectory (attempt ``attempt``'s, else the task's own: the result's,
    or its last attempt's when it ended without one), step by step, with its outcome,
    attempts, group and neighbours; a ``train`` task's own trajectory also gets its
    tokens, decoded when the run names a tokenizer."""
    rec = await meta.get_task(task_id)
    try:
        res: TaskResult | None = await meta.get_result(task_id)
    except NotFound:
        res = None  # still running, or lost: an earlier attempt's trajectory may be kept
    tries = await meta.list_attempts(task_id)
    keys = await attempt_trajectories(artifacts, rec.spec, [a.number for a in tries])
    key, own = _pick(res, tries, keys, attempt)
    try:
        raw = (await artifacts.get(key)).decode("utf-8", errors="replace") if key else None
    except NotFound:
        raw = None
    if raw is None:
        which = "" if attempt is None else f" of attempt {attempt}"
        raise NotFound(f"task {task_id} has no stored trajectory{which}")
    traj = Trajectory.model_validate(json.loads(raw))
    run = await meta.get_run(rec.spec.run_id)
    kind = str(traj.meta.get("task_type", rec.spec.type.value if rec.spec.type else "eval"))
    group, near = await _group_and_neighbours(meta, artifacts, rec, kind)
    rows = attempt_rows(tries, keys, res, key)
    if own:  # the task's last attempt: the task's outcome, and its error
        said = outcome(rec.state, res)
        reward = _reward(rec, res)
        error = (res.error if res is not None else None) or rec.error
        shown: dict[str, Any] = {
            "outcome": said,
            "errored": is_error(said),
            "reward": reward,
            "error": error,
            "trained": reward is not None,  # an ungraded sample is masked
            "sample": _sample_view(run, traj, reward or 0.0, kind) if kind == "train" else None,
        }
        shown["no_turns"] = _no_turns(traj, said, None, error)
    else:  # an earlier attempt, retried: its own error; its tokens trained nothing
        mine = next((r for r in rows if r["this"]), {})
        shown = {"outcome": "retried", "errored": True, "reward": None,
                 "error": mine.get("error"), "trained": False, "sample": None}  # fmt: skip
        shown["no_turns"] = _no_turns(traj, "an error", mine.get("error_kind"), mine.get("error"))
    return {
        "task": task_id,
        "run": rec.spec.run_id,
        "group": group_id(rec.spec),
        "type": kind,
        **shown,
        "attempt": {"number": traj.attempt, "of": len(tries), "final": own},
        "attempts": rows,
        "trajectory": traj.model_dump(mode="json"),
        "group_rewards": group,
        **near,
    }

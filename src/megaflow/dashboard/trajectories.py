"""The trajectory page's data: the steps, the outcome, the tokens decoded, the group, neighbours.

:func:`trajectory_view` reads a task's stored trajectory and adds what an
engineer debugging a rollout asks first: how it ended (outcome, reward, the
error message), the token sequence of a ``train`` sample with every id
decoded (through the tokenizer the run's config names, when one is found),
the group the sample belongs to with each sibling's reward and
advantage, and the previous and next trajectories of the run.

The advantage shown is the run's own: the estimator its ``train.algorithm``
names, applied to the rewards of the sample's whole step
(:mod:`megaflow.dashboard.advantages`); the page names the estimator.
"""

from __future__ import annotations

import asyncio
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from megaflow.core.errors import NotFound
from megaflow.core.outcomes import is_error, outcome
from megaflow.core.states import TaskState
from megaflow.core.tasks import RunSpec, TaskRecord, TaskResult, group_id
from megaflow.core.trajectory import Trajectory
from megaflow.dashboard.advantages import run_estimator, step_advantages, step_of
from megaflow.dashboard.attempts import attempt_rows, attempt_trajectories
from megaflow.storage.abstract import ArtifactStore, MetadataStore
from megaflow.train.samples import TokenDrift, sample_from_trajectory

TOKENIZER_FILE = "tokenizer.json"


@lru_cache(maxsize=8)
def _load_tokenizer(path: str) -> Any:
    from tokenizers import Tokenizer  # the train extra; without it ids stay ids

    return Tokenizer.from_file(path)


def tokenizer_file(config: Any) -> Path | None:
    """The first ``tokenizer.json`` in a directory the run's config names (a model path,
    a policy, a tokenizer), searched depth first; None when the config names none."""
    if isinstance(config, dict):
        for value in config.values():
            if (found := tokenizer_file(value)) is not None:
                return found
    elif isinstance(config, list):
        for value in config:
            if (found := tokenizer_file(value)) is not None:
                return found
    elif isinstance(config, str) and 0 < len(config) < 4096 and "\n" not in config:
        path = Path(config)
        for candidate in (path / TOKENIZER_FILE, path):
            try:
                if candidate.name == TOKENIZER_FILE and candidate.is_file():
                    return candidate
            except OSError:
                continue
    return None


def decode_ids(run: RunSpec, ids: list[int]) -> tuple[list[str] | None, str]:
    """Each id's text and where the tokenizer came from, or None and why there is none."""
    path = tokenizer_file(run.config)
    if path is None:
        return None, "the run's config names no directory with a tokenizer.json"
    try:
        tok = _load_tokenizer(str(path))
    except ImportError:
        return None, "the tokenizers package is not installed (the train extra)"
    except Exception as exc:  # a file tokenizers cannot read: say so, show the ids
        return None, f"{path}: {exc}"
    return [tok.decode([i], skip_special_tokens=False) for i in ids], str(path)


def _sample_view(run: RunSpec, traj: Trajectory, reward: float, task_type: str) -> dict[str, Any]:
    try:
        sample = sample_from_trajectory(
            traj, reward, group_id=str(traj.meta.get("group_id", traj.task_id)), task_type=task_type
        )
    except TokenDrift as exc:
        return {"problem": str(exc)}
    pieces, source = decode_ids(run, [*sample.prompt_ids, *sample.completion_ids])
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


async def _group_and_neighbours(
    meta: MetadataStore, rec: TaskRecord, kind: str
) -> tuple[dict[str, Any] | None, dict[str, str | None]]:
    records = await meta.list_tasks(rec.spec.run_id)
    results = {r.task_id: r for r in await meta.list_results(rec.spec.run_id)}
    with_traj = [
        r.id for r in records if r.id in results and "trajectory" in results[r.id].artifacts
    ]
    at = with_traj.index(rec.id) if rec.id in with_traj else -1
    near = {
        "previous": with_traj[at - 1] if at > 0 else None,
        "next": with_traj[at + 1] if 0 <= at < len(with_traj) - 1 else None,
    }
    if kind != "train":
        return None, near
    gid, step = group_id(rec.spec), step_of(group_id(rec.spec))
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
         "advantage": adv, "this": r.id == rec.id, "has_trajectory": r.id in with_traj}
        for r, rw, adv in zip(groups[gid], rewards[gid], mine, strict=True)
    ]  # fmt: skip
    estimator = {"name": est.name, "formula": est.formula, "notes": est.notes,
                 "problem": est.problem, "step_groups": len(groups)}  # fmt: skip
    return {"id": gid, "estimator": estimator, "members": rows}, near


async def trajectory_view(
    meta: MetadataStore, artifacts: ArtifactStore, task_id: str, attempt: int | None = None
) -> dict[str, Any]:
    """A task's stored trajectory (the result's, else attempt ``attempt``'s), step by step,
    with its outcome, attempts, group and neighbours; the result's ``train`` sample also
    gets its tokens, decoded when the run names a tokenizer."""
    rec = await meta.get_task(task_id)
    try:
        res: TaskResult | None = await meta.get_result(task_id)
    except NotFound:
        res = None  # still running, or lost: an earlier attempt's trajectory may be kept
    tries = await meta.list_attempts(task_id)
    keys = await attempt_trajectories(artifacts, rec.spec, [a.number for a in tries])
    final = res.artifacts.get("trajectory") if res is not None else None
    key = final if attempt is None else keys.get(attempt)
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
    group, near = await _group_and_neighbours(meta, rec, kind)
    rows = attempt_rows(tries, keys, res, key)
    if key == final and res is not None:  # the result's attempt: the task's outcome
        said = outcome(rec.state, res)
        shown = {
            "outcome": said,
            "errored": is_error(said),
            "reward": _reward(rec, res),
            "error": res.error or rec.error,
            "sample": _sample_view(run, traj, res.reward, kind) if kind == "train" else None,
        }
    else:  # an earlier attempt, retried: its own error; its tokens trained nothing
        mine = next((r for r in rows if r["this"]), {})
        shown = {"outcome": "retried", "errored": True, "reward": None,
                 "error": mine.get("error"), "sample": None}  # fmt: skip
    return {
        "task": task_id,
        "run": rec.spec.run_id,
        "group": group_id(rec.spec),
        "type": kind,
        **shown,
        "attempt": {"number": traj.attempt, "of": len(tries), "final": key == final},
        "attempts": rows,
        "trajectory": traj.model_dump(mode="json"),
        "group_rewards": group,
        **near,
    }

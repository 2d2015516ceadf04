"""Held-out rounds of a training run: sampled pass@1 with its interval, greedy, malformed.

A held-out evaluation (before training, every ``eval_every`` steps, after
the last) is one or two rounds of ``eval`` tasks at priority +1, with the
weights fixed:

* the sampled round: ``eval_samples`` samples of every held-out task at
  ``eval_temperature`` (the agent's if unset). Its figure is pass@1, the
  mean over prompts of each prompt's mean reward, with the prompt-clustered
  95% interval of :func:`megaflow.app.training.intervals.pass_at_1`;
* with ``eval_greedy``, a greedy round: one sample of every task at
  temperature 0, the share resolved.

Both report the share of graded samples with a malformed answer: a model
turn with no tool call, or a tool call whose arguments are not a JSON
object or whose tool does not exist (what the builtin agent answers with an
error). A sample lost to the infrastructure is counted apart, in no figure.

The held-out tasks are SWE-bench-style instances graded by the run's grading,
or the tasks of one or several held-out sets
(:class:`~megaflow.app.training.splits.HeldOutTask`), each graded by its
set's grader; then the round also reports each set's figures (pass@1 with
its interval over the set's prompts, and the rest) beside the overall ones.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from megaflow.app.job import Job
from megaflow.app.training.curve import EvalPoint
from megaflow.app.training.intervals import pass_at_1, pass_at_k
from megaflow.app.training.rollouts import Rollouts, round_name
from megaflow.app.training.splits import HeldOutTask
from megaflow.core.errors import NotFound
from megaflow.core.states import TaskState
from megaflow.core.tasks import ErrorKind, TaskSpec, TaskType, Timeouts, sample_id

_TOOL_ERRORS = ("error: arguments are not valid JSON", "error: arguments must be", "error: unknown")


def malformed(trajectory: dict[str, Any]) -> bool:
    """Whether a stored trajectory (its JSON) has an answer the agent could not act on."""
    for step in trajectory.get("steps", []):
        kind = step.get("kind")
        if kind == "model_call":
            message = (step.get("response") or {}).get("message") or {}
            if "error" in (step.get("response") or {}):
                continue  # the model service failed, not the answer
            if not message.get("tool_calls"):
                return True
        elif kind == "observation" and str(step.get("content", "")).startswith(_TOOL_ERRORS):
            return True
    return False


@dataclass
class RoundScores:
    """What one held-out round's samples scored, by task key: graded rewards, and
    how many answers were malformed and how many samples lost, per task."""

    rewards: dict[str, list[float]] = field(default_factory=dict)
    malformed_of: dict[str, int] = field(default_factory=dict)
    lost_of: dict[str, int] = field(default_factory=dict)

    @property
    def graded(self) -> int:
        return sum(len(r) for r in self.rewards.values())

    @property
    def malformed(self) -> int:
        return sum(self.malformed_of.values())

    @property
    def lost(self) -> int:
        return sum(self.lost_of.values())

    def only(self, keys: set[str]) -> RoundScores:
        """The scores of the tasks ``keys`` (one held-out set's)."""
        return RoundScores(
            {k: r for k, r in self.rewards.items() if k in keys},
            {k: n for k, n in self.malformed_of.items() if k in keys},
            {k: n for k, n in self.lost_of.items() if k in keys},
        )


def _add(counts: dict[str, int], key: str) -> None:
    counts[key] = counts.get(key, 0) + 1


async def read_round(job: Job, keys: dict[str, str]) -> RoundScores:
    """The graded rewards and malformed answers of the finished tasks ``keys``
    (task id -> the key of its held-out task), by key."""
    md, art = job.stores.metadata, job.stores.artifacts
    out = RoundScores()
    for tid, task_key in keys.items():
        rec = await md.get_task(tid)
        try:
            res = await md.get_result(tid)
        except NotFound:
            _add(out.lost_of, task_key)
            continue
        if rec.state is TaskState.SUCCEEDED:
            reward = res.reward
        elif res.error_kind is ErrorKind.AGENT:
            reward = 0.0  # the policy's own failure
        else:
            _add(out.lost_of, task_key)
            continue
        out.rewards.setdefault(task_key, []).append(reward)
        key = res.artifacts.get("trajectory")
        if key is not None:
            try:
                if malformed(json.loads(await art.get(key))):
                    _add(out.malformed_of, task_key)
            except NotFound:
                pass
    return out


def round_specs(
    rollouts: Rollouts,
    name: str,
    tasks: Sequence[HeldOutTask],
    samples: int,
    temperature: float | None,
) -> dict[str, list[TaskSpec]]:
    """By task key, ``samples`` eval tasks of each held-out task, ids
    ``<run>/<name>.<key>/<n>``, at priority +1 (they run before queued rollouts);
    ``temperature`` overrides the agent's sampling for them."""
    cfg, run = rollouts.job.cfg, rollouts.job.run_id
    own = {} if temperature is None else {"megaflow_sampling": {"temperature": temperature}}
    return {
        t.key: [
            TaskSpec(
                id=sample_id(run, f"{name}.{t.key}", n),
                run_id=run,
                type=TaskType.EVAL,
                sample=n,
                payload={**t.graded_payload(), **own},
                priority=cfg.priority + 1,
                max_attempts=cfg.max_attempts,
                timeouts=Timeouts(deadline_s=cfg.deadline_s),
            )
            for n in range(samples)
        ]
        for t in tasks
    }


async def _round(
    rollouts: Rollouts,
    name: str,
    tasks: Sequence[HeldOutTask],
    samples: int,
    temperature: float | None,
) -> RoundScores:
    by_key = round_specs(rollouts, name, tasks, samples, temperature)
    keys = {spec.id: key for key, specs in by_key.items() for spec in specs}
    await rollouts.submit_specs(name, [spec for specs in by_key.values() for spec in specs])
    await rollouts.scores(name)  # waits for every task of the round
    return await read_round(rollouts.job, keys)


def _sampled(scores: RoundScores, samples: int) -> dict[str, float | int | None]:
    """The sampled round's figures of ``scores``: pass@1 with its interval, pass@k,
    malformed share, graded and lost samples."""
    out: dict[str, float | int | None] = {
        "samples": scores.graded, "masked": scores.lost, "reward_mean": None,
        "ci_low": None, "ci_high": None, "pass_at_k": None, "malformed": None,
    }  # fmt: skip
    if scores.graded:
        est = pass_at_1(list(scores.rewards.values()))
        out.update(reward_mean=est.mean, ci_low=est.low, ci_high=est.high)
        out["malformed"] = scores.malformed / scores.graded
        if samples >= 2 and any(len(v) >= samples for v in scores.rewards.values()):
            out["pass_at_k"] = pass_at_k(list(scores.rewards.values()), samples)
    return out


def _with_greedy(
    figures: dict[str, float | int | None], scores: RoundScores
) -> dict[str, float | int | None]:
    """``figures`` with the greedy round's share resolved; its lost samples are masked too."""
    graded, lost = scores.graded, scores.lost
    return {
        **figures,
        "masked": int(figures["masked"] or 0) + lost,
        "greedy": sum(sum(r) for r in scores.rewards.values()) / graded if graded else None,
        "greedy_samples": graded,
    }


def _by_set(tasks: Sequence[HeldOutTask]) -> dict[str, set[str]]:
    """Each held-out set's task keys, in the sets' order; empty for a split."""
    out: dict[str, set[str]] = {}
    for t in tasks:
        if t.set is not None:
            out.setdefault(t.set, set()).add(t.key)
    return out


async def evaluate(
    rollouts: Rollouts,
    incarnation: str,
    step: int,
    version: int,
    tasks: Sequence[HeldOutTask],
    *,
    samples: int,
    temperature: float | None,
    greedy: bool,
) -> EvalPoint:
    """One held-out evaluation with the weights at ``version``, as a curve point:
    the figures over every held-out task and, for held-out sets, each set's."""
    name = round_name(incarnation, step, held_out=True)
    sampled = await _round(rollouts, name, tasks, samples, temperature)
    figures = _sampled(sampled, samples)
    point = EvalPoint.model_validate(
        {"step": step, "weights_version": version, **figures,
         "k": 0 if figures["pass_at_k"] is None else samples}
    )  # fmt: skip
    point.per_prompt = {k: sum(v) / len(v) for k, v in sorted(sampled.rewards.items()) if v}
    g = await _round(rollouts, f"{name}g", tasks, 1, 0.0) if greedy else None
    if g is not None:
        point.greedy_samples, point.masked = g.graded, point.masked + g.lost
        if g.graded:
            point.greedy = sum(sum(r) for r in g.rewards.values()) / g.graded
            point.greedy_malformed = g.malformed / g.graded
    sets = _by_set(tasks)
    if sets:
        point.sets = {}
        for set_name, keys in sets.items():
            own = _sampled(sampled.only(keys), samples)
            point.sets[set_name] = own if g is None else _with_greedy(own, g.only(keys))
    return point


def _set_part(name: str, f: dict[str, float | int | None]) -> str:
    mean, low, high = f.get("reward_mean"), f.get("ci_low"), f.get("ci_high")
    if mean is None:
        return f"{name} -"
    part = f"{name} {mean:.3f}"
    if low is not None and high is not None:
        part += f" [{low:.3f}, {high:.3f}]"
    part += f" n {f.get('samples')}"
    if f.get("greedy") is not None:
        part += f" greedy {f['greedy']:.3f}"
    return part


def eval_line(p: EvalPoint) -> str:
    """The line `megaflow train` prints for a held-out evaluation."""
    what = "before training" if p.step == 0 else f"after step {p.step}"
    gone = f", {p.masked} lost" if p.masked else ""
    if p.reward_mean is None:  # not 0.000: nothing was graded
        return f"held-out reward {what}: no graded sample{gone} (weights v{p.weights_version})"
    line = f"held-out reward {what}: pass@1 {p.reward_mean:.3f}"
    if p.ci_low is not None and p.ci_high is not None:
        line += f" [{p.ci_low:.3f}, {p.ci_high:.3f}]"
    line += f" over {p.samples} samples"
    if p.pass_at_k is not None:
        line += f", pass@{p.k} {p.pass_at_k:.3f}"
    if p.malformed is not None:
        line += f", malformed {p.malformed:.3f}"
    if p.greedy is not None:
        line += f"; greedy {p.greedy:.3f} over {p.greedy_samples}"
    sets = "  sets " + "  ".join(_set_part(n, f) for n, f in p.sets.items()) if p.sets else ""
    return f"{line}{gone} (weights v{p.weights_version}){sets}"


def _set_figure(f: dict[str, float | int | None] | None) -> str:
    if f is None or f.get("reward_mean") is None:
        return "none graded"
    low, high = f.get("ci_low"), f.get("ci_high")
    span = f" [{low:.3f}, {high:.3f}]" if low is not None and high is not None else ""
    return f"{f['reward_mean']:.3f}{span} n {f.get('samples')}"


def closing_lines(evals: Sequence[EvalPoint]) -> list[str]:
    """What `megaflow train` prints of its held-out rounds when it ends: pass@1 at the
    first and the last round and, for held-out sets, each set's with its interval
    and graded samples (a set the first round lacks shows ``none graded`` there)."""
    if not evals:
        return []
    first, last = evals[0], evals[-1]
    shown = [f"{e.reward_mean:.3f}" if e.reward_mean is not None else "none graded"
             for e in (first, last)]  # fmt: skip
    if first is last:  # one round (e.g. a control arm run with --no-eval-before)
        out = [f"held-out reward: {shown[1]} at step {last.step} (weights v{last.weights_version})"]
    else:
        out = [
            f"held-out reward: {shown[0]} at step {first.step} -> "
            f"{shown[1]} at step {last.step} (weights v{last.weights_version})"
        ]
    rounds = [first, last] if first is not last else [last]
    names = [n for e in rounds for n in (e.sets or {})]
    for name in dict.fromkeys(names):
        parts = [f"{_set_figure((e.sets or {}).get(name))} at step {e.step}" for e in rounds]
        out.append(f"held-out {name}: {' -> '.join(parts)}")
    return out

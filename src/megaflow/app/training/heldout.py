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
from megaflow.core.errors import NotFound
from megaflow.core.states import TaskState
from megaflow.core.tasks import ErrorKind, TaskType
from megaflow.datasets.instance import SWEInstance

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
    """What one held-out round's graded samples scored, by instance id."""

    rewards: dict[str, list[float]] = field(default_factory=dict)
    malformed: int = 0
    lost: int = 0

    @property
    def graded(self) -> int:
        return sum(len(r) for r in self.rewards.values())


async def read_round(job: Job, ids: Sequence[str]) -> RoundScores:
    """The graded rewards and malformed answers of the finished tasks ``ids``."""
    md, art = job.stores.metadata, job.stores.artifacts
    out = RoundScores()
    for tid in ids:
        rec = await md.get_task(tid)
        try:
            res = await md.get_result(tid)
        except NotFound:
            out.lost += 1
            continue
        if rec.state is TaskState.SUCCEEDED:
            reward = res.reward
        elif res.error_kind is ErrorKind.AGENT:
            reward = 0.0  # the policy's own failure
        else:
            out.lost += 1
            continue
        out.rewards.setdefault(str(rec.spec.payload["instance_id"]), []).append(reward)
        key = res.artifacts.get("trajectory")
        if key is not None:
            try:
                if malformed(json.loads(await art.get(key))):
                    out.malformed += 1
            except NotFound:
                pass
    return out


async def _round(
    rollouts: Rollouts,
    name: str,
    instances: Sequence[SWEInstance],
    samples: int,
    temperature: float | None,
) -> RoundScores:
    ids = await rollouts.submit(
        name, instances, samples, TaskType.EVAL, priority=1, temperature=temperature
    )
    await rollouts.scores(name)  # waits for every task of the round
    return await read_round(rollouts.job, ids)


async def evaluate(
    rollouts: Rollouts,
    incarnation: str,
    step: int,
    version: int,
    instances: Sequence[SWEInstance],
    *,
    samples: int,
    temperature: float | None,
    greedy: bool,
) -> EvalPoint:
    """One held-out evaluation with the weights at ``version``, as a curve point."""
    name = round_name(incarnation, step, held_out=True)
    sampled = await _round(rollouts, name, instances, samples, temperature)
    point = EvalPoint(
        step=step, weights_version=version, samples=sampled.graded, masked=sampled.lost
    )
    if sampled.graded:
        est = pass_at_1(list(sampled.rewards.values()))
        point.reward_mean, point.ci_low, point.ci_high = est.mean, est.low, est.high
        point.malformed = sampled.malformed / sampled.graded
        point.per_prompt = {k: sum(v) / len(v) for k, v in sorted(sampled.rewards.items())}
        if samples >= 2 and any(len(v) >= samples for v in sampled.rewards.values()):
            point.k = samples
            point.pass_at_k = pass_at_k(list(sampled.rewards.values()), samples)
    if greedy:
        g = await _round(rollouts, f"{name}g", instances, 1, 0.0)
        point.greedy_samples, point.masked = g.graded, point.masked + g.lost
        if g.graded:
            point.greedy = sum(sum(r) for r in g.rewards.values()) / g.graded
            point.greedy_malformed = g.malformed / g.graded
    return point


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
    return f"{line}{gone} (weights v{p.weights_version})"

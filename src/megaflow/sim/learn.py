"""Training the ``learned`` policy in the simulator: advantage actor-critic (A2C).

Each iteration draws one trace from the training families and simulates it
``rollouts`` times with the current actor sampling its decisions (numpy, as
in the scheduler); each decision's reward is minus the task-seconds spent in
the system until the next one (:class:`~megaflow.sim.gym_env.InSystem`), so
an episode's return is minus its total job completion time. Two more costs
are on by default: the tail (a task costs more per second the longer it has
been in the system, :attr:`TrainOptions.tail`) and the fragmentation (room no
waiting task fits, :attr:`TrainOptions.fragmentation`). The wait bound
(:class:`~megaflow.scheduler.wait_bound.WaitBound`) is on while training as
in service: its placements are not the network's and are not learned from,
but their effect is in every reward. Returns are
undiscounted and measured in mean task durations of the trace. As in Decima,
the rollouts of one trace give a baseline that depends on the trace: the
mean return of the other rollouts at the same simulated time. The critic
learns what is left of the return from the decision's state, and the actor
follows the remaining advantage, with an entropy bonus. torch is imported
here only (``megaflow sim train``); the result is a numpy checkpoint.
"""

from __future__ import annotations

import asyncio
import bisect
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from megaflow.scheduler.learned import LearnedPolicy
from megaflow.scheduler.learned_net import CRITIC_INPUTS, N_FEATURES, Checkpoint
from megaflow.sim.gym_env import Episode, InSystem, simulator

if TYPE_CHECKING:
    from megaflow.scheduler.learned_net import Array


@dataclass
class TrainOptions:
    iterations: int = 200
    rollouts: int = 3
    """Simulations of each drawn trace (the trace-dependent baseline needs at least 2)."""
    lr: float = 3e-3
    entropy: float = 0.01
    hidden: int = 32
    seed: int = 0
    horizon: float = 0.0
    """Discount rewards by ``exp(-dt / (horizon x mean task duration))``; 0 keeps the
    undiscounted return (minus the episode's total JCT from then on)."""
    tail: float = 2.0
    """Charge each task ``1 + age / (tail x mean task duration)`` per second in the
    system (:meth:`~megaflow.sim.gym_env.InSystem.age_area`): a convex cost of
    completion time that weighs holding back a task by how long it is in already, so
    the tail (P99, the slowdown of the longest waits) costs more than the average.
    0 charges 1 (average JCT alone)."""
    fragmentation: float = 1.0
    """Charge the fleet's stranded room (free room no waiting task fits,
    :meth:`~megaflow.scheduler.dispatch.DispatchCore.fragmentation`) as this many
    waiting tasks per task-sized share of it, per second: the choice of what runs
    decides which gaps are left, and a gap no waiting task fits is lost work. 0 leaves
    it out."""


@dataclass
class TrainLog:
    iterations: int = 0
    decisions: int = 0
    """Placements the network chose (and learns from)."""
    forced: int = 0
    """Placements the wait bound made ahead of the network (not learned from)."""
    seconds: float = 0.0
    mean_jct: list[float] = field(default_factory=list)
    """Mean job completion time of each iteration's rollouts, in seconds."""


@dataclass
class _Rollout:
    rows: list[Array] = field(default_factory=list)
    states: list[Array] = field(default_factory=list)
    actions: list[int] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    areas: list[float] = field(default_factory=list)
    returns: Array | None = None
    mean_jct: float = 0.0
    forced: int = 0


def _rollout(
    episode: Episode, net: Checkpoint, rng: random.Random, horizon: float = 0.0,
    tail: float = 0.0, frag: float = 0.0,
) -> _Rollout:  # fmt: skip
    out = _Rollout()
    tracker = InSystem(episode.trace)
    stranded = [0.0, 0.0, 0.0]  # integral of stranded room in task shares, last value, time
    fleet_cpu = sum(i.cpu for i in episode.instances)
    task_cpu = sum(t.cpu for t in episode.trace) / max(1, len(episode.trace))

    def choose(rows: Array, state: Array) -> int:
        logits = net.logits(rows).astype(np.float64)
        p = np.exp(logits - logits.max())
        a = rng.choices(range(len(p)), weights=(p / p.sum()).tolist())[0]
        out.rows.append(rows)
        out.states.append(state)
        out.actions.append(a)
        out.times.append(sim.now)
        out.areas.append(cost(sim.now))
        return a

    mean_s = sum(t.duration_s for t in episode.trace) / len(episode.trace)

    def cost(now: float) -> float:
        total = tracker.area(now)
        if tail > 0:
            total += tracker.age_area(now) / (tail * mean_s)
        if frag > 0:
            stranded[0] += stranded[1] * (now - stranded[2])
            stranded[1] = sim.core.fragmentation() * fleet_cpu / task_cpu
            stranded[2] = now
            total += frag * stranded[0]
        return total

    sim = simulator(episode, choose)
    sim.core.listeners.append(tracker.finished)
    report = asyncio.run(sim.run())
    end = cost(sim.now)
    areas = np.array([*out.areas, end])
    rewards = -(areas[1:] - areas[:-1]) / (len(episode.trace) * mean_s)
    if horizon > 0:
        keep = np.exp(-np.diff(np.array([*out.times, sim.now])) / (horizon * mean_s))
        ret, acc = np.empty_like(rewards), 0.0
        for i in range(len(rewards) - 1, -1, -1):
            acc = rewards[i] + keep[i] * acc
            ret[i] = acc
        out.returns = ret.astype(np.float32)
    else:
        out.returns = np.cumsum(rewards[::-1])[::-1].astype(np.float32)
    out.mean_jct = report.avg_jct_s
    out.forced = sum(q.forced for q in sim.core.queues.values() if isinstance(q, LearnedPolicy))
    return out


def _baselines(group: list[_Rollout]) -> list[Array]:
    """For each rollout, the mean return of the others at the same simulated time."""
    out = []
    for i, r in enumerate(group):
        others = [g for j, g in enumerate(group) if j != i and g.times]
        b = np.zeros(len(r.times), dtype=np.float32)
        for g in others:
            assert g.returns is not None
            idx = [min(bisect.bisect_left(g.times, t), len(g.times) - 1) for t in r.times]
            b += g.returns[idx]
        out.append((b / max(1, len(others))).astype(np.float32))
    return out


def _nets(hidden: int, init: Checkpoint | None) -> tuple[Any, Any]:
    import torch
    from torch import nn

    def mlp(n_in: int) -> nn.Sequential:
        return nn.Sequential(
            nn.Linear(n_in, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
            nn.Linear(hidden, 1),
        )  # fmt: skip

    actor, critic = mlp(N_FEATURES), mlp(CRITIC_INPUTS)
    if init is not None:
        for net, layers in ((actor, init.actor), (critic, init.critic)):
            linears = [m for m in net if isinstance(m, nn.Linear)]
            if len(linears) != len(layers) or any(
                lin.weight.shape != (w.shape[1], w.shape[0])
                for lin, (w, _) in zip(linears, layers, strict=False)
            ):
                raise ValueError(f"the starting checkpoint is not {hidden} wide, two layers deep")
            with torch.no_grad():
                for lin, (w, b) in zip(linears, layers, strict=True):
                    lin.weight.copy_(torch.from_numpy(w.T.copy()))
                    lin.bias.copy_(torch.from_numpy(b.copy()))
    return actor, critic


def _export(actor: Any, critic: Any, meta: dict[str, Any]) -> Checkpoint:
    from torch import nn

    def layers(net: nn.Sequential) -> list[tuple[Array, Array]]:
        return [
            (m.weight.detach().numpy().T.copy(), m.bias.detach().numpy().copy())
            for m in net
            if isinstance(m, nn.Linear)
        ]

    return Checkpoint(layers(actor), layers(critic), meta)


def train(
    episodes: Callable[[random.Random], Episode],
    options: TrainOptions | None = None,
    *,
    init: Checkpoint | None = None,
    meta: dict[str, Any] | None = None,
    progress: Callable[[int, float], None] | None = None,
) -> tuple[Checkpoint, TrainLog]:
    """Train from ``init`` (or fresh weights) on traces drawn by ``episodes(rng)``."""
    import torch

    opt = options or TrainOptions()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the nets are tiny: more threads only add overhead
    try:
        return _train(torch, episodes, opt, init, meta, progress)
    finally:
        torch.set_num_threads(threads)


def _train(
    torch: Any,
    episodes: Callable[[random.Random], Episode],
    opt: TrainOptions,
    init: Checkpoint | None,
    meta: dict[str, Any] | None,
    progress: Callable[[int, float], None] | None,
) -> tuple[Checkpoint, TrainLog]:
    torch.manual_seed(opt.seed)
    rng = random.Random(opt.seed)
    actor, critic = _nets(opt.hidden, init)
    params = [*actor.parameters(), *critic.parameters()]
    optim = torch.optim.Adam(params, lr=opt.lr)
    log = TrainLog()
    started = time.perf_counter()
    info = dict(meta or {})
    for it in range(opt.iterations):
        episode = episodes(rng)
        net = _export(actor, critic, info)
        group = [
            _rollout(episode, net, rng, opt.horizon, opt.tail, opt.fragmentation)
            for _ in range(max(1, opt.rollouts))
        ]
        group = [g for g in group if g.actions]
        if not group:
            continue
        _update(actor, critic, optim, group, opt)
        log.decisions += sum(len(g.actions) for g in group)
        log.forced += sum(g.forced for g in group)
        log.mean_jct.append(float(np.mean([g.mean_jct for g in group])))
        log.iterations = it + 1
        if progress is not None:
            progress(it + 1, log.mean_jct[-1])
    log.seconds = time.perf_counter() - started
    info.update(iterations=log.iterations, decisions=log.decisions, train_seconds=log.seconds)
    return _export(actor, critic, info), log


def _update(
    actor: Any, critic: Any, optim: Any, group: Sequence[_Rollout], opt: TrainOptions
) -> None:
    import torch

    rows = [r for g in group for r in g.rows]
    width = max(len(r) for r in rows)
    x = np.zeros((len(rows), width, N_FEATURES), dtype=np.float32)
    mask = np.zeros((len(rows), width), dtype=bool)
    for i, r in enumerate(rows):
        x[i, : len(r)] = r
        mask[i, : len(r)] = True
    actions = torch.tensor([a for g in group for a in g.actions])
    states = torch.from_numpy(np.stack([s for g in group for s in g.states]))
    base = _baselines(list(group)) if len(group) > 1 else [np.zeros_like(group[0].returns)]
    target = torch.from_numpy(
        np.concatenate([g.returns - b for g, b in zip(group, base, strict=True)])
    )
    logits = actor(torch.from_numpy(x)).squeeze(-1)
    logits = logits.masked_fill(~torch.from_numpy(mask), float("-inf"))
    logp = torch.log_softmax(logits, dim=-1)
    chosen = logp.gather(1, actions[:, None]).squeeze(1)
    probs = logp.exp()
    entropy = -(probs * logp.masked_fill(~torch.from_numpy(mask), 0.0)).sum(-1).mean()
    value = critic(states).squeeze(-1)
    adv = (target - value).detach()
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    loss = -(chosen * adv).mean() + 0.5 * ((value - target) ** 2).mean() - opt.entropy * entropy
    optim.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_([p for g in optim.param_groups for p in g["params"]], 1.0)
    optim.step()

"""Fine-tuning the ``learned`` policy on a live run's recorded decisions (off-policy).

The live scheduler records what each decision saw and chose and how the
placement ended (:mod:`megaflow.scheduler.decision_log`). The data come from
one run of a real cluster and from the policy that was deployed, usually
greedy: its choices have probability 1 and the other candidates none, so
importance weights (A2C or PPO made off-policy) are undefined or degenerate.
We use advantage-weighted regression (AWR; Peng et al., 2019) instead:

1. The return of a decision is minus the run's tasks in the system from the
   decision on (arrival to the end of their last placement, from the recorded
   outcomes), integrated over time and discounted with a horizon of the run's
   mean time in the system. Undiscounted, as in the simulator
   (:mod:`megaflow.sim.learn`), one trajectory's return is dominated by the
   arrivals after the decision; there the other rollouts of the same trace
   remove that part, here there are none, so the discount keeps the credit
   near the decision.
2. The critic is regressed on those returns from the decision's state.
3. The actor maximises the log-likelihood of the recorded choices, each
   weighted by ``exp(advantage / beta)`` (advantages standardised, weights
   clipped at ``max_weight``): choices that turned out better than the critic
   expected are reinforced more. This stays close to the deployed policy,
   which is what one trajectory of a real cluster can support.

It cannot discover choices the deployed policy never made: record with
``greedy: false`` to let the live policy explore. Only decisions with more
than one candidate teach the actor anything. torch is used here only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from megaflow.scheduler.learned_net import CRITIC_INPUTS, N_FEATURES, Checkpoint
from megaflow.sim.learn import _export, _nets

if TYPE_CHECKING:
    from megaflow.scheduler.decision_log import Session
    from megaflow.scheduler.learned_net import Array


@dataclass
class FinetuneOptions:
    steps: int = 200
    """Gradient steps of the critic, then as many of the actor (full batch)."""
    lr: float = 1e-3
    beta: float = 1.0
    """Temperature of the advantage weights (on standardised advantages)."""
    max_weight: float = 20.0
    entropy: float = 0.01
    horizon_s: float | None = None
    """Discount horizon of the returns; None: the run's mean time in the system."""
    seed: int = 0


@dataclass
class FinetuneLog:
    decisions: int = 0
    with_choice: int = 0
    """Decisions with more than one candidate: the only ones the actor learns from."""
    sessions: int = 0
    seconds: float = 0.0


def returns(session: Session, horizon_s: float | None = None) -> Array:
    """Each decision's return: minus the tasks in the system from its time on,
    discounted by ``exp(-dt / horizon_s)`` and integrated over time, over
    ``horizon_s`` (the run's mean time in the system by default). A placement still
    running when the session ended counts until the session's last recorded time."""
    ds = session.decisions
    last = max(max(d.t for d in ds), max((d.ended_at or 0.0) for d in ds))
    span: dict[str, tuple[float, float]] = {}
    for d in ds:  # the last placement of a task ends its stay
        arrived = d.enqueued_at if d.enqueued_at is not None else d.t
        first = span.get(d.task, (arrived, 0.0))[0]
        span[d.task] = (min(first, arrived), d.ended_at if d.ended_at is not None else last)
    enq = np.array([s[0] for s in span.values()], dtype=np.float64)
    end = np.array([s[1] for s in span.values()], dtype=np.float64)
    tau = horizon_s or max(float((end - enq).mean()), 1e-9)
    t = np.array([d.t for d in ds], dtype=np.float64)
    out = np.empty(len(ds), dtype=np.float64)
    for i in range(0, len(ds), 1024):  # decisions x tasks, in slices to bound memory
        now = t[i : i + 1024, None]
        start = np.maximum(enq[None, :], now)
        stay = np.exp(-(start - now) / tau) - np.exp(-(np.maximum(end[None, :], start) - now) / tau)
        out[i : i + 1024] = stay.sum(1)
    return (-out).astype(np.float32)


def _batch(sessions: list[Session], horizon_s: float | None) -> tuple[Any, Any, Any, Any, Any]:
    """Candidate rows padded to the widest decision, their mask, the choices, the
    critic states and the returns."""
    ds = [d for s in sessions for d in s.decisions]
    width = max(len(d.rows) for d in ds)
    x = np.zeros((len(ds), width, N_FEATURES), dtype=np.float32)
    mask = np.zeros((len(ds), width), dtype=bool)
    for i, d in enumerate(ds):
        rows = np.asarray(d.rows, dtype=np.float32)
        if rows.ndim != 2 or rows.shape[1] != N_FEATURES or not 0 <= d.chosen < len(rows):
            raise ValueError(f"recorded decision of task {d.task} has the wrong shape")
        x[i, : len(rows)] = rows
        mask[i, : len(rows)] = True
    states = np.asarray([d.state for d in ds], dtype=np.float32)
    if states.shape != (len(ds), CRITIC_INPUTS):
        raise ValueError("recorded critic states have the wrong width")
    actions = np.array([d.chosen for d in ds], dtype=np.int64)
    target = np.concatenate([returns(s, horizon_s) for s in sessions if s.decisions])
    return x, mask, actions, states, target


def _step(optim: Any, loss: Any, params: Any) -> None:
    import torch

    optim.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    optim.step()


def finetune(
    init: Checkpoint,
    sessions: list[Session],
    options: FinetuneOptions | None = None,
    *,
    meta: dict[str, Any] | None = None,
) -> tuple[Checkpoint, FinetuneLog]:
    """A new checkpoint: ``init`` fine-tuned by AWR on the recorded ``sessions``."""
    import torch

    opt = options or FinetuneOptions()
    sessions = [s for s in sessions if s.decisions]
    if not sessions:
        raise ValueError("no recorded decisions to learn from")
    log = FinetuneLog(sessions=len(sessions))
    started = time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(opt.seed)
        hidden = init.actor[0][0].shape[1]
        actor, critic = _nets(hidden, init)
        x, mask, actions, states, target = _batch(sessions, opt.horizon_s)
        log.decisions, log.with_choice = len(actions), int((mask.sum(1) > 1).sum())
        xs, ms = torch.from_numpy(x), torch.from_numpy(mask)
        st, g = torch.from_numpy(states), torch.from_numpy(target)
        c_opt = torch.optim.Adam(critic.parameters(), lr=opt.lr)
        for _ in range(opt.steps):
            _step(c_opt, ((critic(st).squeeze(-1) - g) ** 2).mean(), critic.parameters())
        with torch.no_grad():
            adv = g - critic(st).squeeze(-1)
            adv = (adv - adv.mean()) / (adv.std() + 1e-8) if len(adv) > 1 else adv * 0
            weight = torch.exp(adv / opt.beta).clamp(max=opt.max_weight)
        a_opt = torch.optim.Adam(actor.parameters(), lr=opt.lr)
        chosen_idx = torch.from_numpy(actions)[:, None]
        for _ in range(opt.steps):
            logits = actor(xs).squeeze(-1).masked_fill(~ms, float("-inf"))
            logp = torch.log_softmax(logits, dim=-1)
            chosen = logp.gather(1, chosen_idx).squeeze(1)
            entropy = -(logp.exp() * logp.masked_fill(~ms, 0.0)).sum(-1).mean()
            loss = -(weight * chosen).sum() / weight.sum() - opt.entropy * entropy
            _step(a_opt, loss, actor.parameters())
    finally:
        torch.set_num_threads(threads)
    log.seconds = time.perf_counter() - started
    info = {**init.meta, **(meta or {}), "finetune": "awr", "finetune_decisions": log.decisions,
            "finetune_with_choice": log.with_choice}  # fmt: skip
    return _export(actor, critic, info), log

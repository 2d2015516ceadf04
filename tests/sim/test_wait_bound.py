"""No task starves under the learned policy, whatever its network scores.

A burst trace (quiet stretches, then a burst of about a thousand tasks) runs
under a chooser that always takes the youngest candidate (the worst order for
the oldest task) and under the shipped checkpoint. The fair-share start of each
task is rebuilt here from the simulation's own start times, independently of
the policy: a ``fair`` queue gets every arrival and gives one task per start
(ties: arrivals first). A task that ``fair`` would have started while it still
waited is due from then on; with the wait bound, it waits at most the bound's
slack past that point plus the time room takes to free for it and for the
overdue tasks ahead (here under one more slack); without the bound, tasks wait
hours past it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from megaflow.core.tasks import TaskSpec
from megaflow.scheduler.abstract import PendingTask
from megaflow.scheduler.learned import Chooser, LearnedPolicy
from megaflow.scheduler.learned_net import FEATURES, Checkpoint, read_checkpoint
from megaflow.scheduler.policies import FairPolicy
from megaflow.sim.engine import Simulator
from megaflow.sim.families import family
from megaflow.sim.gym_env import Episode

SLACK_S = 600.0
CHECKPOINT = Path(__file__).resolve().parents[2] / "examples/policies/learned.safetensors"
AGE = FEATURES.index("age")


def youngest(rows: object, state: object) -> int:
    import numpy as np

    return int(np.asarray(rows)[:, AGE].argmin())


@pytest.fixture(scope="module")
def burst() -> Episode:
    ep = family("bursts").episode(10_001, tasks=2400)
    first = ep.trace[0].arrival_s
    biggest = max(
        sum(1 for t in ep.trace if t.arrival_s == a) for a in {t.arrival_s for t in ep.trace}
    )
    assert biggest >= 500  # a burst of hundreds to thousands at one instant
    assert ep.trace[-1].arrival_s - first > 4 * 3600  # and quiet hours around it
    return ep


def late_past_fair_share(
    ep: Episode, chooser: Chooser | None, net: Checkpoint | None, bound: float | None
) -> list[float]:
    """Per task that ``fair`` would have started while it waited: its start minus
    (that point plus the slack)."""
    sim = Simulator(ep.config, ep.instances, ep.trace, policy=lambda: LearnedPolicy(
        net, chooser=chooser, wait_bound=bound, wait_floor_s=SLACK_S))  # fmt: skip
    report = asyncio.run(sim.run())
    assert report.finished == len(ep.trace)
    starts = [t.arrival_s + w for t, w in zip(ep.trace, sim.waits(), strict=True)]
    events = sorted([(t.arrival_s, 0, i) for i, t in enumerate(ep.trace)]
                    + [(s, 1, i) for i, s in enumerate(starts)])  # fmt: skip
    shadow = FairPolicy(key="run")
    late = []
    for t, kind, i in events:
        if kind == 0:
            spec = TaskSpec.model_construct(id=str(i), run_id=ep.trace[i].run)
            shadow.push(PendingTask(spec, seq=i + 1, enqueued_at=t))
            continue
        task = shadow.pop()
        assert task is not None
        j = int(task.id)
        if starts[j] > t:  # fair starts task j now; it still waits
            late.append(starts[j] - (t + SLACK_S))
    return late


# A multiple of ~0 makes every task's slack the floor: SLACK_S, whatever the estimates.
TINY = 1e-9


def test_a_starving_order_is_held_to_its_fair_share_plus_the_slack(burst: Episode) -> None:
    bounded = late_past_fair_share(burst, youngest, None, TINY)
    assert max(bounded) <= SLACK_S
    free = late_past_fair_share(burst, youngest, None, None)
    assert max(free) > 10 * SLACK_S  # without the bound: starved for hours
    assert sum(x > SLACK_S for x in free) > 100


def test_the_shipped_network_is_held_to_its_fair_share_plus_the_slack(burst: Episode) -> None:
    net = read_checkpoint(CHECKPOINT)
    bounded = late_past_fair_share(burst, None, net, TINY)
    free = late_past_fair_share(burst, None, net, None)
    assert max(bounded) <= 2 * SLACK_S
    assert max(free) > 10 * SLACK_S

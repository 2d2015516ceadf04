"""The learned policy's features: what the network sees of a small queue and fleet,
value by value, worked out by hand from the definitions in ``FEATURES``."""

from __future__ import annotations

import math

import numpy as np

from megaflow.core.tasks import Outcome, Resources, TaskSpec, TaskType
from megaflow.scheduler.abstract import InstanceSpec, PendingTask, TaskFeedback
from megaflow.scheduler.fleet import Instance, Region
from megaflow.scheduler.learned import LearnedPolicy
from megaflow.scheduler.learned_net import FEATURES

Rows = list[tuple[float, ...]]


def _spec(tid: str, run: str, kind: TaskType, priority: int, cpu: float) -> TaskSpec:
    res = Resources(cpu=cpu, memory_mb=512)
    return TaskSpec(id=tid, run_id=run, type=kind, priority=priority, resources=res)


def _finished(policy: LearnedPolicy, run: str, kind: TaskType, run_s: float) -> None:
    done = PendingTask(_spec(f"done-{run}", run, kind, 0, 1.0), seq=0, enqueued_at=0.0)
    policy.observe(TaskFeedback(done, Outcome.OK, "i", 0.0, run_s))


def _first_decision(policy: LearnedPolicy, region: Region) -> tuple[Rows, list[float]]:
    """The candidate rows and critic state of the policy's first decision."""
    seen: list[tuple[Rows, list[float]]] = []

    def chooser(rows: np.ndarray, state: np.ndarray) -> int:
        seen.append(([tuple(map(float, r)) for r in rows], [float(v) for v in state]))
        return 0

    policy.chooser = chooser
    policy.decide(region, lambda task, inst: False, limit=1, scan_limit=10)
    return seen[0]


def _same_rows(got: Rows, want: Rows) -> None:
    """The same rows, in any order (the order of candidates is not a feature)."""
    assert len(got) == len(want)
    for row in want:
        match = [g for g in got if np.allclose(g, row, rtol=1e-6, atol=1e-7)]
        assert match, f"no candidate row {row} among {got}"


def test_the_features_of_a_small_queue_and_fleet() -> None:
    region = Region("default")
    big = Instance.from_spec(InstanceSpec("big", cpu=8, memory_mb=16384, slots=8), 0.0)
    small = Instance.from_spec(InstanceSpec("small", cpu=2, memory_mb=4096, slots=4), 0.0)
    region.add(big)
    region.add(small)
    region.reserve(big, TaskSpec(id="busy", run_id="x", resources=Resources(cpu=4, memory_mb=1024)))
    # big: 4 of 8 cores free, 7 slots; small: all free; the region runs 1 task of 12 slots

    policy = LearnedPolicy(None)
    _finished(policy, "r1", TaskType.EVAL, 10.0)  # (eval, r1): 10 s
    _finished(policy, "r9", TaskType.EVAL, 50.0)  # (eval, any run): mean of 10 and 50 = 30 s
    _finished(policy, "r2", TaskType.TRAIN, 40.0)  # (train, r2): 40 s
    # class A: eval r1, priority 2, 1 core, two tasks; class B: train r2, priority 0,
    # 2 cores; class C: eval r3 (no run of its own yet: 30 s), priority 1, half a core
    queue = [
        ("a1", "r1", TaskType.EVAL, 2, 1.0, 0.0),
        ("b", "r2", TaskType.TRAIN, 0, 2.0, 6.0),
        ("c", "r3", TaskType.EVAL, 1, 0.5, 8.0),
        ("a2", "r1", TaskType.EVAL, 2, 1.0, 9.0),
    ]
    for seq, (tid, run, kind, prio, cpu, at) in enumerate(queue, 1):
        policy.push(PendingTask(_spec(tid, run, kind, prio, cpu), seq=seq, enqueued_at=at))
    policy.now = 10.0

    rows, state = _first_decision(policy, region)

    assert len(FEATURES) == 12
    # Heads at now = 10: A waited 10 s, predicted 10 s, work 1 x 10 = 10;
    # B waited 4 s, predicted 40 s, work 2 x 40 = 80; C waited 2 s, predicted 30 s, work 15.
    # Each head on its best fit by the binding resource (CPU here), never spread:
    # A (1 core) and C (half a core) on big (4 of 8 cores free: a smaller share left
    # over than on small's 2 of 2); B (2 cores) on small, which it fills.
    log_c = math.log(1.5) / math.log(8)  # log(15 / 10) over log(80 / 10)
    a = [1.0, 1.0, 0.25, 0.125, 0.0, 0.5]  # priority .. waited_vs_predicted of A's head
    b = [0.0, 0.4, 1.0, 1.0, 1.0, 4 / 44]
    c = [0.5, 0.2, 0.75, 0.1875, log_c, 2 / 32]
    load = 1 / 12
    #        resource_efficiency, node_load, region_load, backlog_share, spread, known_time
    want = [
        (*a, 1000 / 4000, 0.5, load, 2 / 4, 0.0, 1.0),  # A on big
        (*b, 2000 / 2000, 0.0, load, 1 / 4, 0.0, 1.0),  # B on small
        (*c, 500 / 4000, 0.5, load, 1 / 4, 0.0, 1.0),  # C on big
    ]
    _same_rows(rows, want)
    mean = [sum(col) / 3 for col in zip(*want, strict=True)]
    most = [max(col) for col in zip(*want, strict=True)]
    pressure = math.log(1 + 4 / 12)  # 4 tasks queued over 12 slots
    assert np.allclose(state, [*mean, *most, load, pressure], rtol=1e-6, atol=1e-7)


def test_before_any_run_time_is_known_every_task_is_predicted_one_second() -> None:
    region = Region("default")
    region.add(Instance.from_spec(InstanceSpec("i", cpu=4, memory_mb=8192, slots=2), 0.0))
    policy = LearnedPolicy(None)
    policy.push(PendingTask(_spec("t", "r", TaskType.EVAL, 3, 2.0), seq=1, enqueued_at=1.0))
    policy.now = 4.0

    rows, state = _first_decision(policy, region)

    # one candidate (one instance: spread is the packed instance, so no second row);
    # with nothing to compare against, priority is 0.5 and the work rank 0
    want = (0.5, 1.0, 1.0, 1.0, 0.0, 3 / 4, 2000 / 4000, 0.0, 0.0, 1.0, 0.0, 0.0)
    _same_rows(rows, [want])
    assert np.allclose(state, [*want, *want, 0.0, math.log(1 + 1 / 2)], rtol=1e-6, atol=1e-7)

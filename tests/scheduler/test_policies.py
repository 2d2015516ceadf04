"""Policy orderings, aging, fair shares, per-type queues and custom plug-ins."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from megaflow.core.errors import PluginError
from megaflow.core.tasks import TaskType
from megaflow.scheduler.abstract import PendingTask, SchedulingPolicy
from megaflow.scheduler.config import CustomPolicyConfig, FairPolicyConfig, PriorityPolicyConfig
from megaflow.scheduler.policies import (
    FairPolicy,
    FifoPolicy,
    PriorityPolicy,
    TypedQueues,
    make_policy,
)
from tests.scheduler.helpers import task


def pending(i: int, at: float = 0.0, **kw: object) -> PendingTask:
    return PendingTask(task(f"t{i}", **kw), seq=i, enqueued_at=at)  # type: ignore[arg-type]


def drain(policy: SchedulingPolicy) -> list[str]:
    out = []
    while (t := policy.pop()) is not None:
        out.append(t.id)
    return out


def test_fifo_pops_in_arrival_order() -> None:
    p = FifoPolicy()
    order = list(range(50))
    random.Random(1).shuffle(order)
    for i in order:
        p.push(pending(i, priority=i % 7))
    assert drain(p) == [f"t{i}" for i in range(50)]


def test_priority_pops_highest_first_then_oldest() -> None:
    p = PriorityPolicy(aging_per_s=0)
    for i, prio in enumerate([1, 5, 3, 5, 0]):
        p.push(pending(i, priority=prio))
    assert drain(p) == ["t1", "t3", "t2", "t0", "t4"]


def test_aging_lets_an_old_low_priority_task_overtake() -> None:
    old = pending(0, at=0.0, priority=0)
    new = pending(1, at=100.0, priority=5)
    aged = PriorityPolicy(aging_per_s=0.1)  # old has gained 10 by t=100
    aged.push(new)
    aged.push(old)
    assert drain(aged) == ["t0", "t1"]
    assert aged.effective(old, 100.0) == pytest.approx(10.0)
    no_aging = PriorityPolicy(aging_per_s=0.0)
    no_aging.push(old)
    no_aging.push(new)
    assert drain(no_aging) == ["t1", "t0"]


def test_aging_means_no_starvation_under_a_stream_of_high_priority() -> None:
    p = PriorityPolicy(aging_per_s=1.0)
    p.push(pending(0, at=0.0, priority=0))
    served_at = None
    for step in range(1, 100):
        p.push(pending(step, at=float(step), priority=20))
        if p.pop().id == "t0":  # type: ignore[union-attr]
            served_at = step
            break
    assert served_at is not None
    assert served_at <= 21


@pytest.mark.parametrize("weights", [{"a": 1, "b": 2, "c": 3}, {"a": 1, "b": 1}, {"a": 5, "b": 1}])
def test_fair_shares_within_5_percent_over_10000_decisions(weights: dict[str, float]) -> None:
    p = FairPolicy(key="run", weights=weights)
    seq = 0
    for run in weights:
        for _ in range(10_000):
            seq += 1
            p.push(PendingTask(task(f"{run}-{seq}", run=run), seq, 0.0))
    got = Counter(p.pop().spec.run_id for _ in range(10_000))  # type: ignore[union-attr]
    total = sum(weights.values())
    for run, w in weights.items():
        want = 10_000 * w / total
        assert abs(got[run] - want) <= 0.05 * want, (run, got[run], want)


def test_fair_by_tenant_and_push_back_keeps_the_share() -> None:
    p = FairPolicy(key="tenant", weights={"x": 3, "y": 1})
    for i in range(400):
        p.push(pending(i, tenant="x" if i % 2 else "y"))
    got: Counter[str] = Counter()
    for _ in range(200):
        t = p.pop()
        assert t is not None
        p.push_back([t])  # a task that did not fit comes back at the front
        t2 = p.pop()
        assert t2 is t
        got[t.spec.tenant] += 1
    assert got["x"] == pytest.approx(150, abs=5)


def test_per_type_queues_serve_types_by_weight() -> None:
    p = TypedQueues(FifoPolicy, {"train": 3.0, "eval": 1.0})
    for i in range(2000):
        p.push(pending(i, type_=TaskType.TRAIN if i % 2 else TaskType.EVAL))
    got = Counter(p.pop().spec.type for _ in range(1000))  # type: ignore[union-attr]
    assert got[TaskType.TRAIN] == pytest.approx(750, rel=0.05)


def test_custom_policy_by_dotted_path_boosts_training() -> None:
    cfg = CustomPolicyConfig(
        path="examples.policies.boost_training.BoostTrainingPolicy", options={"aging_per_s": 0}
    )
    p = make_policy(cfg)
    p.push(pending(0, priority=12, type_=TaskType.EVAL))
    p.push(pending(1, priority=10, type_=TaskType.TRAIN))  # 15 after the boost
    p.push(pending(2, priority=14, type_=TaskType.SYNTH))
    assert drain(p) == ["t1", "t2", "t0"]
    assert p.priority_of(task("x", priority=10, type_=TaskType.TRAIN)) == 15


def test_custom_policy_must_be_a_scheduling_policy() -> None:
    with pytest.raises(PluginError):
        make_policy(CustomPolicyConfig(path="collections.OrderedDict"))


def test_make_policy_builds_per_type_queues_of_the_configured_policy() -> None:
    p = make_policy(PriorityPolicyConfig(aging_per_s=0), "per_type", {"train": 1, "eval": 1})
    assert isinstance(p, TypedQueues)
    assert isinstance(make_policy(FairPolicyConfig()), FairPolicy)

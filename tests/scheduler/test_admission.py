"""Token buckets on a virtual clock, caps, best-fit placement, fragmentation, preemption."""

from __future__ import annotations

import pytest

from megaflow.scheduler.abstract import InstanceSpec, PendingTask
from megaflow.scheduler.admission import Admission, TokenBucket
from megaflow.scheduler.config import (
    AdmissionConfig,
    PriorityPolicyConfig,
    SchedulerConfig,
)
from megaflow.scheduler.dispatch import DispatchCore
from megaflow.scheduler.fleet import Instance
from tests.scheduler.helpers import task


@pytest.mark.parametrize(("rate", "burst"), [(50.0, 10.0), (3.0, 1.0), (1000.0, 100.0)])
def test_token_bucket_rate_within_5_percent_on_a_virtual_clock(rate: float, burst: float) -> None:
    bucket = TokenBucket(rate, burst, now=0.0)
    taken = 0
    seconds = 100.0
    steps = 100_000
    for i in range(steps + 1):
        now = seconds * i / steps
        while bucket.try_take(now):
            taken += 1
    want = rate * seconds + burst
    assert abs(taken - want) <= 0.05 * want
    assert bucket.ready_at(seconds) > seconds  # just drained: the next token is ahead


def core(**kw: object) -> DispatchCore:
    return DispatchCore(SchedulerConfig(**kw))  # type: ignore[arg-type]


def test_sandbox_rate_limits_starts_and_reports_when_to_wake() -> None:
    c = core(max_concurrency=1000, admission=AdmissionConfig(sandbox_rate=10, sandbox_burst=2))
    c.add_instance(InstanceSpec("i", cpu=1000, memory_mb=10**6, slots=1000))
    for i in range(50):
        c.submit(task(f"t{i}", memory_mb=1), now=0.0)
    assert len(c.plan(0.0)) == 2  # the burst
    assert c.admission.next_refill == pytest.approx(0.1)
    assert len(c.plan(0.1)) == 1
    assert len(c.plan(1.1)) == 2  # refilled up to the burst only


def test_a_bucket_refusal_refuses_the_start_and_costs_the_other_bucket_nothing() -> None:
    """Both buckets are checked before either is taken from: a start the run's
    bucket refuses leaves its sandbox token for another run's task, and one the
    sandbox bucket refuses leaves its run's token for later."""
    cfg = AdmissionConfig(sandbox_rate=4, sandbox_burst=2, run_start_rate=1, run_start_burst=1)
    adm = Admission(cfg, max_concurrency=10)
    inst = Instance.from_spec(InstanceSpec("i", cpu=64, memory_mb=10**5, slots=64), 0.0)

    def pending(tid: str, run: str) -> PendingTask:
        return PendingTask(task(tid, run=run), seq=0, enqueued_at=0.0)

    assert adm.admit(pending("a1", "a"), inst, 0.0)
    assert not adm.admit(pending("a2", "a"), inst, 0.0)  # run a's one token is spent
    assert adm.next_refill == pytest.approx(1.0)  # when run a has a token again
    assert adm.admit(pending("b1", "b"), inst, 0.0)  # the sandbox's second token is still there
    adm.reset_round()
    assert not adm.admit(pending("c1", "c"), inst, 0.0)  # a1 and b1 took both sandbox tokens
    assert adm.next_refill == pytest.approx(0.25)  # when the sandbox bucket has one again
    assert adm.admit(pending("c1", "c"), inst, 0.25)  # run c's token was not taken at 0
    assert adm.running == 3
    assert adm.per_run == {"a": 1, "b": 1, "c": 1}


def test_caps_global_per_run_and_per_region() -> None:
    c = core(
        max_concurrency=5,
        admission=AdmissionConfig(max_per_run=2, max_per_region={"eu": 1}),
    )
    c.add_instance(InstanceSpec("us1", region="us", cpu=64, memory_mb=10**5, slots=64))
    c.add_instance(InstanceSpec("eu1", region="eu", cpu=64, memory_mb=10**5, slots=64))
    for run in ("a", "b", "c", "d"):
        for i in range(3):
            c.submit(task(f"{run}{i}", run=run), now=0.0)
    got = c.plan(0.0)
    assert len(got) == 5
    per_run: dict[str, int] = {}
    for d in got:
        per_run[d.task.spec.run_id] = per_run.get(d.task.spec.run_id, 0) + 1
    assert max(per_run.values()) <= 2
    assert sum(1 for d in got if d.instance.spec.region == "eu") <= 1
    c.finish(got[0].task.id, 1.0)
    assert len(c.plan(1.0)) == 1


def test_best_fit_picks_the_tightest_instance_and_tracks_capacity() -> None:
    c = core(max_concurrency=10)
    c.add_instance(InstanceSpec("big", cpu=8, memory_mb=16384, slots=10))
    c.add_instance(InstanceSpec("small", cpu=2, memory_mb=4096, slots=10))
    c.submit(task("a", cpu=2, memory_mb=4096), now=0.0)
    (d,) = c.plan(0.0)
    assert d.instance.id == "small"
    c.submit(task("b", cpu=1, memory_mb=1024), now=0.0)
    (d2,) = c.plan(0.0)
    assert d2.instance.id == "big"
    c.submit(task("c", cpu=16), now=0.0)
    assert c.plan(0.0) == []  # fits nowhere: waits
    assert c.depth == 1


def test_gpu_tasks_go_only_where_gpus_are() -> None:
    c = core(max_concurrency=10)
    c.add_instance(InstanceSpec("cpu", cpu=8, memory_mb=16384, slots=8))
    c.add_instance(InstanceSpec("gpu", cpu=8, memory_mb=16384, gpu=2, slots=8))
    c.submit(task("g", gpu=1), now=0.0)
    (d,) = c.plan(0.0)
    assert d.instance.id == "gpu"


def test_fragmentation_is_free_room_no_queued_task_fits_over_capacity() -> None:
    c = core(max_concurrency=10)
    c.add_instance(InstanceSpec("a", cpu=4, memory_mb=8192, slots=10))
    c.add_instance(InstanceSpec("b", cpu=4, memory_mb=8192, slots=10))
    c.submit(task("x", cpu=3, memory_mb=1024), now=0.0)
    c.submit(task("y", cpu=3, memory_mb=1024), now=0.0)
    assert len(c.plan(0.0)) == 2  # each instance now has 1 cpu and 7 GB free
    assert c.fragmentation() == 0.0  # nothing queued
    c.submit(task("z", cpu=2, memory_mb=1024), now=0.0)
    assert c.plan(0.0) == []
    assert c.fragmentation() == pytest.approx(2 / 8)  # 2 free cores of 8, both stranded
    c.submit(task("w", cpu=1, memory_mb=8192), now=0.0)  # the fewest cpus, too much memory
    assert c.fragmentation() == pytest.approx(2 / 8)
    c.submit(task("v", cpu=1, memory_mb=4096), now=0.0)  # fits both: nothing stranded
    assert c.fragmentation() == 0.0


def test_tasks_shard_to_the_region_with_most_room() -> None:
    c = core(max_concurrency=100)
    c.add_instance(InstanceSpec("us1", region="us", cpu=64, memory_mb=10**5, slots=10))
    c.add_instance(InstanceSpec("eu1", region="eu", cpu=64, memory_mb=10**5, slots=2))
    for i in range(12):
        c.submit(task(f"t{i}"), now=0.0)
    assert c.queued == {"us": 10, "eu": 2}


def test_preemption_takes_the_lowest_priority_running_task() -> None:
    cfg = {"max_concurrency": 2, "preemption": True, "policy": PriorityPolicyConfig(aging_per_s=0)}
    c = core(**cfg)
    c.add_instance(InstanceSpec("i", cpu=2, memory_mb=4096, slots=2))
    c.submit(task("low", priority=1), now=0.0)
    c.submit(task("mid", priority=5), now=0.0)
    assert len(c.plan(0.0)) == 2
    c.submit(task("high", priority=9), now=1.0)
    (d,) = c.plan(1.0)
    assert d.task.id == "high"
    assert d.preempt == ["low"]
    assert "low" not in c.running
    c.submit(task("lower", priority=0), now=2.0)
    assert c.plan(2.0) == []  # nothing running is below it


def test_no_preemption_unless_enabled() -> None:
    c = core(max_concurrency=1, policy=PriorityPolicyConfig(aging_per_s=0))
    c.add_instance(InstanceSpec("i", cpu=1, memory_mb=4096, slots=1))
    c.submit(task("low", priority=1), now=0.0)
    assert len(c.plan(0.0)) == 1
    c.submit(task("high", priority=9), now=0.0)
    assert c.plan(0.0) == []


def test_a_lost_instance_hands_back_its_tasks() -> None:
    c = core(max_concurrency=10)
    c.add_instance(InstanceSpec("a", cpu=4, memory_mb=8192, slots=4))
    for i in range(3):
        c.submit(task(f"t{i}"), now=0.0)
    assert len(c.plan(0.0)) == 3
    lost = c.remove_instance("a")
    assert sorted(t.id for t in lost) == ["t0", "t1", "t2"]
    assert c.admission.running == 0
    assert c.running == {}

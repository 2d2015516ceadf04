"""The preemptive shortest-remaining-work reference: it stops a long task for a short one
and resumes it where it stopped."""

from __future__ import annotations

import pytest

from megaflow.scheduler.abstract import InstanceSpec
from megaflow.sim.srpt import srpt_pooled
from megaflow.sim.trace import TraceTask


def test_a_short_task_preempts_a_long_one_which_resumes_without_loss() -> None:
    fleet = [InstanceSpec("i", cpu=1, memory_mb=4096, slots=1)]
    trace = [TraceTask(arrival_s=0.0, duration_s=100.0), TraceTask(arrival_s=1.0, duration_s=10.0)]
    r = srpt_pooled(fleet, trace, sandbox_start_s=5.0)
    # the long task needs 105 s; at 1 s it has 104 left, the short one 15: the short one
    # runs 1..16, the long one resumes and ends at 16 + 104 = 120
    assert r.finished == 2
    assert r.avg_jct_s == pytest.approx((120.0 + 15.0) / 2)
    assert r.max_wait_s == 0.0  # each started as it arrived
    assert r.preemptions == 1
    assert r.utilisation == pytest.approx(1.0)  # never idle: 1 + 15 + 104 s of work


def test_the_pool_runs_what_fits_its_total_capacity() -> None:
    fleet = [InstanceSpec(f"i{k}", cpu=2, memory_mb=4096, slots=4) for k in range(2)]
    trace = [TraceTask(arrival_s=0.0, duration_s=d, cpu=2.0) for d in (10.0, 20.0, 30.0)]
    r = srpt_pooled(fleet, trace, sandbox_start_s=0.0)
    # 4 cpus: two 2-cpu tasks at once, the shortest first; the third waits for the first
    assert r.avg_jct_s == pytest.approx((10.0 + 20.0 + 40.0) / 3)
    assert r.max_wait_s == pytest.approx(10.0)
    assert r.preemptions == 0

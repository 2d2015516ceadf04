"""The simulator: traces, determinism, and the real dispatcher on a virtual clock."""

from __future__ import annotations

import asyncio
import itertools
import statistics
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.core.errors import InvalidInput
from megaflow.scheduler.config import AdmissionConfig, PriorityPolicyConfig, SchedulerConfig
from megaflow.sim.engine import Simulator
from megaflow.sim.studies import compare, fleet, scaling_study, scaling_trace, simulate
from megaflow.sim.trace import TraceTask, load_trace, save_trace, synthetic_trace


def test_synthetic_trace_is_seeded_mixed_heavy_tailed_and_bursty() -> None:
    a = synthetic_trace(5000, seed=3, rate=20.0, burst_prob=0.02, burst_size=20)
    assert a == synthetic_trace(5000, seed=3, rate=20.0, burst_prob=0.02, burst_size=20)
    assert a != synthetic_trace(5000, seed=4, rate=20.0, burst_prob=0.02, burst_size=20)
    mix = Counter(t.type for t in a)
    assert mix["train"] / 5000 == pytest.approx(0.5, abs=0.03)
    assert mix["synth"] / 5000 == pytest.approx(0.2, abs=0.03)
    durations = sorted(t.duration_s for t in a)
    assert durations[int(0.99 * len(durations))] > 5 * statistics.median(durations)
    same_time = Counter(t.arrival_s for t in a)
    assert max(same_time.values()) >= 20  # a burst
    assert all(x.arrival_s <= y.arrival_s for x, y in itertools.pairwise(a))


def test_trace_files_round_trip_and_reject_bad_lines(tmp_path: Path) -> None:
    trace = synthetic_trace(50, seed=1)
    path = tmp_path / "t.jsonl"
    save_trace(trace, path)
    assert load_trace(path) == trace
    path.write_text('{"arrival_s": 1, "duration_s": 2}\n{"arrival_s": 0, "bogus": 1}\n')
    with pytest.raises(InvalidInput, match=":2:"):
        load_trace(path)


def test_simulation_is_deterministic_and_finishes_every_task() -> None:
    trace = synthetic_trace(800, seed=5, rate=2.0)
    a = simulate("fair", fleet(10), trace)
    b = simulate("fair", fleet(10), trace)
    assert a == b
    assert a.finished == 800
    assert 0 < a.utilisation <= 1
    assert a.p99_jct_s >= a.avg_jct_s > 0


def test_priority_policy_serves_high_priority_first_under_overload() -> None:
    trace = [
        TraceTask(arrival_s=i * 0.01, duration_s=100.0, priority=10 if i % 4 == 0 else 0)
        for i in range(400)
    ]
    insts = fleet(2)  # 16 slots for 400 tasks

    def high_wait(cfg: SchedulerConfig) -> float:
        sim = Simulator(cfg, insts, trace)
        asyncio.run(sim.run())
        return sim.mean_wait(lambda t: t.priority == 10)

    prio = high_wait(
        SchedulerConfig(policy=PriorityPolicyConfig(aging_per_s=0), max_concurrency=10_000)
    )
    fifo = high_wait(SchedulerConfig(max_concurrency=10_000))
    assert prio < 0.5 * fifo


def test_sandbox_rate_limit_on_the_virtual_clock() -> None:
    trace = [TraceTask(arrival_s=0.0, duration_s=50.0) for _ in range(200)]
    cfg = SchedulerConfig(
        max_concurrency=10_000, admission=AdmissionConfig(sandbox_rate=10, sandbox_burst=1)
    )
    sim = Simulator(cfg, fleet(100), trace)
    report = asyncio.run(sim.run())
    # 200 starts at 10/s: the last one waits about 19.9 s.
    assert report.finished == 200
    assert max(sim.waits()) == pytest.approx(19.9, rel=0.05)


def test_preemption_in_the_simulator() -> None:
    trace = [TraceTask(arrival_s=0.0, duration_s=1000.0, priority=0) for _ in range(16)]
    trace += [TraceTask(arrival_s=10.0, duration_s=10.0, priority=9) for _ in range(4)]
    cfg = SchedulerConfig(
        max_concurrency=10_000, preemption=True, policy=PriorityPolicyConfig(aging_per_s=0)
    )
    sim = Simulator(cfg, fleet(2), trace)
    report = asyncio.run(sim.run())
    assert report.preemptions == 4
    assert report.finished == 20
    assert max(sim.waits()[16:]) == pytest.approx(0.0)


def test_end_to_end_time_of_heavy_tailed_tasks_stays_near_its_lower_bound() -> None:
    sizes = [1, 100, 2000]
    got = scaling_study(sizes, boot_s=120.0)
    assert [r.finished for r in got.values()] == sizes
    for n, report in zip(sizes, got.values(), strict=True):
        bound = 120.0 + max(t.duration_s for t in scaling_trace(n))
        assert bound <= report.makespan_s <= 1.25 * bound
    spans = [r.makespan_s for r in got.values()]
    assert spans == sorted(spans)  # the longest task grows with n: no flat line built in


def test_scaling_trace_is_heavy_tailed() -> None:
    durations = sorted(t.duration_s for t in scaling_trace(10_000, median_s=300.0))
    median, p99 = durations[5_000], durations[9_900]
    assert 270 <= median <= 330
    assert p99 >= 8 * median


def test_compare_runs_every_policy_on_the_same_trace() -> None:
    got = compare(["fifo", "priority", "fair"], instances=5, tasks=300, seed=2)
    assert list(got) == ["fifo", "priority", "fair"]
    assert all(r.finished == 300 for r in got.values())


def test_cli_prints_a_table_and_rejects_unknown_policies(tmp_path: Path) -> None:
    runner = CliRunner()
    md = tmp_path / "sim.md"
    out = runner.invoke(
        app, ["sim", "--instances", "5", "--tasks", "200", "--compare", "fifo,fair",
              "--markdown", str(md)],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    assert "fifo" in out.output
    assert "fair" in out.output
    assert "| fair |" in md.read_text()
    bad = runner.invoke(app, ["sim", "--policy", "random"])
    assert bad.exit_code == 2

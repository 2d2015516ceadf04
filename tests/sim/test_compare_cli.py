"""``megaflow sim --compare``: the tail figures per policy, and flags on any policy whose
P99 JCT or longest wait is more than 5% worse than the best heuristic's."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.sim.report import SimReport, tail_flags

CHECKPOINT = Path(__file__).resolve().parents[2] / "examples/policies/learned.safetensors"


def _report(avg: float, p99: float, max_wait: float) -> SimReport:
    return SimReport(
        tasks=10, finished=10, avg_jct_s=avg, p99_jct_s=p99, avg_wait_s=1.0, p99_wait_s=1.0,
        max_wait_s=max_wait, utilisation=0.5, fragmentation=0.0, makespan_s=1.0,
        throughput_per_h=1.0, preemptions=0, peak_instances=1, rounds=1,
    )  # fmt: skip


def test_flags_name_what_is_worse_than_the_best_heuristic() -> None:
    fair = _report(100.0, 1000.0, 500.0)  # the lowest average of the heuristics: the best
    reports = {
        "fifo": _report(120.0, 900.0, 400.0),
        "fair": fair,
        "learned": _report(80.0, 1049.0, 700.0),  # P99 +4.9% passes, max wait +40% does not
        "other": _report(90.0, 1100.0, 520.0),  # P99 +10%, max wait +4%
        "same": dataclasses.replace(fair),
    }
    flags = tail_flags(reports)
    assert flags["fair"] == "best heuristic"
    assert flags["learned"] == "WORSE: max wait +40% vs fair"
    assert flags["other"] == "WORSE: P99 JCT +10% vs fair"
    assert "same" not in flags
    assert "fifo" not in flags  # better tail than fair's, though worse on average
    assert tail_flags({"learned": reports["learned"]}) == {}  # no heuristic: no reference


def test_compare_prints_the_tail_fragmentation_and_variance_of_each_policy(
    tmp_path: Path,
) -> None:
    md = tmp_path / "out.md"
    out = CliRunner().invoke(
        app, ["sim", "--family", "memory-skew", "--tasks", "300", "--seed", "10001",
              "--compare", "fifo,priority,fair,learned", "--checkpoint", str(CHECKPOINT),
              "--markdown", str(md)],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    text = md.read_text()
    head = text.splitlines()[2]
    for column in ("JCT avg s", "JCT P99 s", "wait max s", "frag", "exec CV", "vs best heuristic"):
        assert column in head
    rows = {line.split("|")[1].strip(): line for line in text.splitlines()[4:] if "|" in line}
    assert set(rows) == {"fifo", "priority", "fair", "learned"}
    assert sum("best heuristic" in row for row in rows.values()) == 1
    bad = CliRunner().invoke(app, ["sim", "--compare", "fifo,learned"])
    assert bad.exit_code == 2
    assert "--checkpoint" in bad.output

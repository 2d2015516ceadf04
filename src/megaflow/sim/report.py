"""What a simulation measured, and how it prints (a rich table, or markdown)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from rich.table import Table

from megaflow.sim.trace import TraceTask


@dataclass(frozen=True)
class SimReport:
    tasks: int
    finished: int
    avg_jct_s: float
    p99_jct_s: float
    avg_wait_s: float
    p99_wait_s: float
    max_wait_s: float
    utilisation: float
    """Busy CPU-seconds over available CPU-seconds, start to last finish."""
    fragmentation: float
    """Mean over sampled rounds that leave tasks waiting: free room that no queued task
    fits, over the fleet's capacity (:func:`~megaflow.scheduler.fleet.fragmentation`)."""
    makespan_s: float
    throughput_per_h: float
    preemptions: int
    peak_instances: int
    rounds: int
    exec_cv: float = 0.0
    """Execution-time variance: the coefficient of variation (std / mean) of the time
    from placement to end among tasks of one (type, run), weighted by tasks. The
    simulator runs each task for its traced length wherever it is placed (no
    interference between neighbours), so this is the trace's spread, alike for every
    policy; a live cluster's figure would also show contention."""


def exec_cv(groups: dict[tuple[str, str], list[float]]) -> float:
    """Task-weighted mean coefficient of variation of the groups' values."""
    num = n = 0.0
    for xs in groups.values():
        if len(xs) < 2:
            continue
        mean = sum(xs) / len(xs)
        sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1))
        num += len(xs) * (sd / mean if mean else 0.0)
        n += len(xs)
    return num / n if n else 0.0


def _p99(values: list[float]) -> float:
    if not values:
        return math.nan
    values = sorted(values)
    return values[min(len(values) - 1, math.ceil(0.99 * len(values)) - 1)]


def summarize(
    trace: Sequence[TraceTask],
    start: list[float],
    end: list[float],
    busy_cpu_s: float,
    cap_cpu_s: float,
    frag: list[float],
    preemptions: int,
    peak_instances: int,
    rounds: int,
) -> SimReport:
    jct, wait = [], []
    runs: dict[tuple[str, str], list[float]] = {}
    makespan = 0.0
    for tt, s, e in zip(trace, start, end, strict=True):
        if math.isnan(e):
            continue
        jct.append(e - tt.arrival_s)
        wait.append(s - tt.arrival_s)
        runs.setdefault((tt.type, tt.run), []).append(e - s)
        makespan = max(makespan, e)
    n = len(jct)
    return SimReport(
        tasks=len(trace),
        finished=n,
        avg_jct_s=sum(jct) / n if n else math.nan,
        p99_jct_s=_p99(jct),
        avg_wait_s=sum(wait) / n if n else math.nan,
        p99_wait_s=_p99(wait),
        max_wait_s=max(wait) if wait else math.nan,
        utilisation=busy_cpu_s / cap_cpu_s if cap_cpu_s else 0.0,
        fragmentation=sum(frag) / len(frag) if frag else 0.0,
        makespan_s=makespan,
        throughput_per_h=n / makespan * 3600 if makespan else 0.0,
        preemptions=preemptions,
        peak_instances=peak_instances,
        rounds=rounds,
        exec_cv=exec_cv(runs),
    )


COLUMNS = (
    ("tasks", "finished", "{:,}"),
    ("JCT avg s", "avg_jct_s", "{:,.0f}"),
    ("JCT P99 s", "p99_jct_s", "{:,.0f}"),
    ("wait avg s", "avg_wait_s", "{:,.1f}"),
    ("wait P99 s", "p99_wait_s", "{:,.1f}"),
    ("wait max s", "max_wait_s", "{:,.1f}"),
    ("util", "utilisation", "{:.1%}"),
    ("frag", "fragmentation", "{:.1%}"),
    ("exec CV", "exec_cv", "{:.1%}"),
    ("makespan s", "makespan_s", "{:,.0f}"),
    ("tasks/h", "throughput_per_h", "{:,.0f}"),
    ("preempt", "preemptions", "{:,}"),
)


def _cells(r: SimReport) -> list[str]:
    return [fmt.format(getattr(r, attr)) for _, attr, fmt in COLUMNS]


def rich_table(
    reports: dict[str, SimReport], title: str = "simulation", first: str = "policy"
) -> Table:
    table = Table(title=title)
    table.add_column(first, no_wrap=True)
    for name, _, _ in COLUMNS:
        table.add_column(name, justify="right")
    for name, r in reports.items():
        table.add_row(name, *_cells(r))
    return table


def markdown_table(reports: dict[str, SimReport], first: str = "policy") -> str:
    head = [first, *(name for name, _, _ in COLUMNS)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, r in reports.items():
        lines.append("| " + " | ".join([name, *_cells(r)]) + " |")
    return "\n".join(lines) + "\n"

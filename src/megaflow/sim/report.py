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


HEURISTICS = ("fifo", "priority", "fair")


def tail_flags(
    reports: dict[str, SimReport], heuristics: tuple[str, ...] = HEURISTICS,
    tolerance: float = 0.05,
) -> dict[str, str]:  # fmt: skip
    """For each policy, what is worse than the best heuristic's by more than
    ``tolerance``: its P99 JCT or its longest wait. The best heuristic is the one of
    ``heuristics`` in ``reports`` with the lowest average JCT; with none of them run,
    nothing is flagged."""
    ran = [h for h in heuristics if h in reports]
    if not ran:
        return {}
    best = min(ran, key=lambda h: reports[h].avg_jct_s)
    ref = reports[best]
    out: dict[str, str] = {}
    for name, r in reports.items():
        worse = []
        for label, mine, theirs in (("P99 JCT", r.p99_jct_s, ref.p99_jct_s),
                                    ("max wait", r.max_wait_s, ref.max_wait_s)):  # fmt: skip
            if theirs > 0 and mine > theirs * (1 + tolerance):
                worse.append(f"{label} {mine / theirs - 1:+.0%}")
            elif theirs == 0 and mine > 0:
                worse.append(f"{label} {mine:,.0f} s against 0")
        if worse:
            out[name] = "WORSE: " + ", ".join(worse) + f" vs {best}"
        elif name == best:
            out[name] = "best heuristic"
    return out


def _cells(r: SimReport) -> list[str]:
    return [fmt.format(getattr(r, attr)) for _, attr, fmt in COLUMNS]


def rich_table(
    reports: dict[str, SimReport], title: str = "simulation", first: str = "policy",
    flags: dict[str, str] | None = None,
) -> Table:  # fmt: skip
    """One row per report; ``flags`` (by row name) adds a last column."""
    table = Table(title=title)
    table.add_column(first, no_wrap=True)
    for name, _, _ in COLUMNS:
        table.add_column(name, justify="right")
    if flags is not None:
        table.add_column("vs best heuristic")
    for name, r in reports.items():
        extra = [] if flags is None else [flags.get(name, "")]
        table.add_row(name, *_cells(r), *extra)
    return table


def markdown_table(
    reports: dict[str, SimReport], first: str = "policy", flags: dict[str, str] | None = None
) -> str:
    head = [first, *(name for name, _, _ in COLUMNS)]
    if flags is not None:
        head.append("vs best heuristic")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, r in reports.items():
        extra = [] if flags is None else [flags.get(name, "")]
        lines.append("| " + " | ".join([name, *_cells(r), *extra]) + " |")
    return "\n".join(lines) + "\n"

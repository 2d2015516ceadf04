"""``megaflow sim``: run the scheduler on a simulated cluster and print what it did."""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.console import Console

from megaflow.cli.common import console, fail
from megaflow.core.errors import MegaFlowError


def sim(
    instances: int = typer.Option(100, "--instances", min=1, help="Simulated instances."),
    tasks: int = typer.Option(10_000, "--tasks", min=1, help="Tasks in the synthetic trace."),
    policy: str = typer.Option("priority", "--policy", help="fifo, priority or fair."),
    compare: str | None = typer.Option(
        None, "--compare", help="Comma-separated policies to run side by side on the same trace."
    ),
    queues: str = typer.Option("shared", "--queues", help="shared or per_type."),
    load: float = typer.Option(
        1.2, "--load", min=0.01, help="Arrival rate as a multiple of the fleet's CPU capacity."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the synthetic trace."),
    trace: Path | None = typer.Option(None, "--trace", help="A JSON Lines trace file to replay."),
    save_trace: Path | None = typer.Option(None, "--save-trace", help="Write the trace used."),
    markdown: Path | None = typer.Option(None, "--markdown", help="Also write the table here."),
) -> None:
    """Simulate INSTANCES instances running TASKS tasks under one or more policies."""
    from megaflow.sim.report import markdown_table, rich_table
    from megaflow.sim.studies import arrival_rate
    from megaflow.sim.studies import compare as run_compare
    from megaflow.sim.trace import load_trace, synthetic_trace
    from megaflow.sim.trace import save_trace as write_trace

    if queues not in ("shared", "per_type"):
        fail(f"--queues must be shared or per_type, not {queues!r}")
    policies = [p.strip() for p in (compare or policy).split(",") if p.strip()]
    bad = [p for p in policies if p not in ("fifo", "priority", "fair")]
    if bad:
        fail(f"unknown policy {bad[0]!r}; use fifo, priority or fair")
    try:
        if trace is not None:
            used = load_trace(trace)
        else:
            mix = {"train": 0.5, "eval": 0.3, "synth": 0.2}
            used = synthetic_trace(
                tasks, seed=seed, rate=arrival_rate(instances, load, mix), mix=mix
            )
    except (MegaFlowError, OSError) as exc:
        fail(str(exc))
    if save_trace is not None:
        write_trace(used, save_trace)
    started = time.perf_counter()
    reports = run_compare(policies, instances, len(used), queues=queues, trace=used)
    wall = time.perf_counter() - started
    title = f"{instances:,} instances, {len(used):,} tasks, {queues} queues ({wall:.1f}s wall)"
    wide = Console(width=max(console.width, 130))
    wide.print(rich_table(reports, title=title))
    if markdown is not None:
        markdown.write_text(f"{title}\n\n" + markdown_table(reports))

"""``megaflow sim``: run the scheduler on a simulated cluster and print what it did;
``megaflow sim train``: train the ``learned`` policy in the simulator."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from megaflow.cli.common import console, fail
from megaflow.cli.fit import fitted
from megaflow.core.errors import MegaFlowError

app = typer.Typer(
    help="Simulate the scheduler on a virtual cluster, or train the learned policy.",
    invoke_without_command=True,
    no_args_is_help=False,
)


@app.callback()
def sim(
    ctx: typer.Context,
    instances: int | None = typer.Option(
        None, "--instances", min=1, help="Simulated instances (100; a family's own fleet)."
    ),
    tasks: int | None = typer.Option(
        None, "--tasks", min=1, help="Tasks in the generated trace (10,000; a family's own)."
    ),
    policy: str = typer.Option("priority", "--policy", help="fifo, priority, fair or learned."),
    compare: str | None = typer.Option(
        None, "--compare", help="Comma-separated policies to run side by side on the same trace."
    ),
    checkpoint: Path | None = typer.Option(
        None, "--checkpoint", help="The learned policy's checkpoint (from `megaflow sim train`)."
    ),
    family: str | None = typer.Option(
        None, "--family", help="Draw the trace from a named family (megaflow.sim.families)."
    ),
    queues: str = typer.Option("shared", "--queues", help="shared or per_type."),
    load: float = typer.Option(
        1.2, "--load", min=0.01, help="Arrival rate as a multiple of the fleet's CPU capacity."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the synthetic trace."),
    trace: Path | None = typer.Option(None, "--trace", help="A JSON Lines trace file to replay."),
    save_trace: Path | None = typer.Option(None, "--save-trace", help="Write the trace used."),
    markdown: Path | None = typer.Option(None, "--markdown", help="Also write the table here."),
    cost: bool = typer.Option(
        False, "--cost", help="Price the paper's fleets for TASKS tasks (2,000) instead."
    ),
) -> None:
    """Simulate INSTANCES instances running TASKS tasks under one or more policies."""
    if ctx.invoked_subcommand is not None:
        return
    if cost:
        _cost(tasks or 2000, seed, markdown)
        return
    from megaflow.sim.report import COLUMNS, markdown_table, tail_flags
    from megaflow.sim.studies import POLICIES, arrival_rate
    from megaflow.sim.studies import compare as run_compare
    from megaflow.sim.trace import load_trace, synthetic_trace
    from megaflow.sim.trace import save_trace as write_trace

    if queues not in ("shared", "per_type"):
        fail(f"--queues must be shared or per_type, not {queues!r}")
    policies = [p.strip() for p in (compare or policy).split(",") if p.strip()]
    bad = [p for p in policies if p not in POLICIES]
    if bad:
        fail(f"unknown policy {bad[0]!r}; use one of {', '.join(POLICIES)}")
    if "learned" in policies and checkpoint is None:
        fail("the learned policy needs --checkpoint PATH (train one with `megaflow sim train`)")
    try:
        if trace is not None:
            used = load_trace(trace)
        elif family is not None:
            from megaflow.sim.families import family as named

            fam = named(family)
            instances = instances or fam.instances
            used = fam.trace(seed, tasks)
        else:
            instances = instances or 100
            mix = {"train": 0.5, "eval": 0.3, "synth": 0.2}
            used = synthetic_trace(
                tasks or 10_000, seed=seed, rate=arrival_rate(instances, load, mix), mix=mix
            )
        instances = instances or 100
        if save_trace is not None:
            write_trace(used, save_trace)
        started = time.perf_counter()
        reports = run_compare(
            policies, instances, len(used), queues=queues, trace=used,
            checkpoint=None if checkpoint is None else str(checkpoint),
        )  # fmt: skip
    except (MegaFlowError, OSError, ValueError) as exc:
        fail(str(exc))
    wall = time.perf_counter() - started
    source = f"family {family}, " if family else ""
    title = (
        f"{source}{instances:,} instances, {len(used):,} tasks, {queues} queues ({wall:.1f}s wall)"
    )
    flags = tail_flags(reports) if len(reports) > 1 else None
    names = [name for name, _, _ in COLUMNS]
    header = ["policy", *names, *(["vs best heuristic"] if flags is not None else [])]
    rows = [
        [name, *(fmt.format(getattr(r, attr)) for _, attr, fmt in COLUMNS)]
        + ([flags.get(name, "")] if flags is not None else [])
        for name, r in reports.items()
    ]
    console.print(fitted(title, header, rows, console))
    worse = [p for p, f in (flags or {}).items() if f.startswith("WORSE")]
    if worse:
        console.print(
            f"[bold red]{', '.join(worse)}: P99 JCT or longest wait more than 5% worse than "
            "the best heuristic's (the one of fifo, priority, fair with the lowest average "
            "JCT)[/]"
        )
    if markdown is not None:
        markdown.write_text(f"{title}\n\n" + markdown_table(reports, flags=flags))


@app.command("train")
def train(
    out: Path = typer.Option(..., "--out", help="Where to write the checkpoint (safetensors)."),
    families: str = typer.Option(
        "mix-poisson,mix-bursty", "--families", help="Comma-separated trace families to train on."
    ),
    iterations: int = typer.Option(200, "--iterations", min=1, help="Training iterations."),
    rollouts: int = typer.Option(3, "--rollouts", min=1, help="Simulations of each trace."),
    tasks: int | None = typer.Option(
        None, "--tasks", min=1, help="Tasks per training trace (each family's own by default)."
    ),
    init: Path | None = typer.Option(None, "--init", help="Go on training this checkpoint."),
    seed: int = typer.Option(0, "--seed", help="Seed of the traces, the sampling and the net."),
    horizon: float = typer.Option(
        0.0,
        "--horizon",
        min=0.0,
        help="Discount rewards over this many mean task durations (0: undiscounted).",
    ),
    tail: float = typer.Option(
        2.0,
        "--tail",
        min=0.0,
        help="Charge a task 1 + age / (TAIL mean durations) per second in the system, to "
        "hold back the JCT tail (0: average JCT alone).",
    ),
    fragmentation: float = typer.Option(
        1.0,
        "--fragmentation",
        min=0.0,
        help="Charge free room no waiting task fits as this many waiting tasks per "
        "task-sized share of it (0: leave it out).",
    ),
    from_run: str | None = typer.Option(
        None, "--from-run", help="Fine-tune on this run's recorded decisions instead (AWR)."
    ),
    config: Path | None = typer.Option(
        None, "--config", "-c", help="With --from-run: a run config naming the artifact store."
    ),
    artifacts: str = typer.Option(
        ".megaflow/artifacts",
        "--artifacts",
        help="With --from-run, without --config: the local artifact store's directory.",
    ),
) -> None:
    """Train the learned policy (actor-critic) on generated traces, or fine-tune it on a
    live run's recorded decisions (--from-run); write a checkpoint."""
    import random

    if from_run is not None:
        from megaflow.cli.sim_finetune import finetune_from_run

        finetune_from_run(from_run, out, init, config, artifacts, iterations, seed)
        return

    from megaflow.scheduler.learned_net import Checkpoint, read_checkpoint, save_checkpoint
    from megaflow.sim.families import TRAIN_SEEDS, family
    from megaflow.sim.gym_env import Episode

    names = [f.strip() for f in families.split(",") if f.strip()]
    try:
        fams = [family(n) for n in names]
        start: Checkpoint | None = None if init is None else read_checkpoint(init)
    except MegaFlowError as exc:
        fail(str(exc))
    if not fams:
        fail("--families names no family")
    try:
        from megaflow.sim.learn import TrainOptions
        from megaflow.sim.learn import train as run_training
    except ImportError as exc:
        fail(f"training needs torch (pip install 'megaflow[train]'): {exc}")

    def episodes(rng: random.Random) -> Episode:
        return rng.choice(fams).episode(rng.randrange(TRAIN_SEEDS), tasks)

    def progress(i: int, jct: float) -> None:
        if i == 1 or i % max(1, iterations // 20) == 0 or i == iterations:
            console.print(f"iteration {i}/{iterations}: mean JCT {jct:,.0f} s")

    opts = TrainOptions(
        iterations=iterations, rollouts=rollouts, seed=seed, horizon=horizon, tail=tail,
        fragmentation=fragmentation,
    )  # fmt: skip
    meta = {"families": names, "tasks": tasks, "seed": seed, "horizon": horizon, "tail": tail,
            "fragmentation": fragmentation, "rollouts": rollouts,
            "init": str(init) if init else None}  # fmt: skip
    try:
        ckpt, log = run_training(episodes, opts, init=start, meta=meta, progress=progress)
    except ValueError as exc:
        fail(str(exc))
    try:
        save_checkpoint(ckpt, out)
    except OSError as exc:
        fail(f"cannot write {out}: {exc}")
    console.print(
        f"wrote {out}: {log.iterations} iterations, {log.decisions:,} decisions, "
        f"{log.seconds:.1f} s, on {', '.join(names)}"
    )


def _cost(tasks: int, seed: int, markdown: Path | None) -> None:
    from megaflow.sim.cost import ASSUMPTIONS, COST_COLUMNS, CostScenario, cost_rows, paper_scenario

    lines: list[str] = []
    for sigma, label in ((0.8, "heavy-tailed lengths"), (0.2, "near-equal lengths")):
        scenario = CostScenario(tasks=tasks, sigma=sigma, seed=seed)
        rows = cost_rows(paper_scenario(scenario))
        title = f"{tasks:,} tasks, {label} (sigma {sigma})"
        console.print(fitted(title, COST_COLUMNS, rows, console, keys=2))
        lines += [f"### {title}", "", "| " + " | ".join(COST_COLUMNS) + " |",
                  "|" + "---|" * len(COST_COLUMNS), *("| " + " | ".join(r) + " |" for r in rows),
                  ""]  # fmt: skip
    note = ASSUMPTIONS.format(**vars(CostScenario(tasks=tasks, sigma=0.8)))
    console.print(note.replace("sigma 0.8", "sigma 0.8 or 0.2"))
    if markdown is not None:
        markdown.write_text("\n".join([*lines, note.replace("sigma 0.8", "sigma 0.8 or 0.2")]))

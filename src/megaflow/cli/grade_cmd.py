"""``megaflow grade PREDICTIONS --tasks SET``: grade patches made by any system.

Each prediction's patch is graded in a fresh local sandbox of its own, the
way a run grades its agents' patches; the reports are written in SWE-bench's
layout (one ``report.json`` per instance and a summary), so results compare
with SWE-bench's harness and with MegaFlow runs alike.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import typer
from rich.table import Table

from megaflow.cli.common import EXIT_BAD_INPUT, EXIT_FAILED, console, fail
from megaflow.cli.tasks_cmd import MaxSourceOption, SourceRootOption
from megaflow.core.errors import MegaFlowError
from megaflow.datasets.instance import SWEInstance
from megaflow.datasets.loader import load_instances
from megaflow.datasets.predictions import (
    Graded,
    Prediction,
    grade_predictions,
    instance_report,
    load_predictions,
    summary_report,
)
from megaflow.environment.abstract import EnvironmentSpec


def grade(
    predictions: Path = typer.Argument(..., help="SWE-bench predictions, JSONL or JSON."),
    tasks: Path = typer.Option(..., "--tasks", help="The task set the predictions are for."),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="Report folder; .megaflow/grades/RUN_ID if not given."
    ),
    run_id: str = typer.Option("megaflow", "--run-id", help="Names the summary report."),
    strict: bool = typer.Option(
        False, "--strict/--lenient", help="Strict grading, or SWE-bench's rule (the default)."
    ),
    concurrency: int = typer.Option(4, "--concurrency", "-j", min=1, help="Sandboxes at once."),
    image: str = typer.Option("host", "--image", help="Sandbox image ('host' or a rootfs)."),
    sandbox_root: str = typer.Option(
        ".megaflow/sandboxes", "--sandbox-root", help="Where local sandboxes keep workspaces."
    ),
    roots: list[Path] | None = SourceRootOption,
    max_source_mb: int = MaxSourceOption,
) -> None:
    """Grade a predictions file; exit 1 if grading failed for any instance."""
    try:
        preds = load_predictions(predictions)
        instances = load_instances(
            tasks, source_roots=roots or [], max_source_bytes=max_source_mb * 1024 * 1024
        )
    except (MegaFlowError, OSError) as exc:
        fail(str(exc), EXIT_BAD_INPUT)
    out = output or Path(".megaflow/grades") / run_id
    try:
        graded = asyncio.run(
            _grade(
                instances, preds, strict, concurrency, EnvironmentSpec(image=image), sandbox_root
            )
        )
    except MegaFlowError as exc:
        fail(str(exc), EXIT_BAD_INPUT)
    summary = _write(out, run_id, preds, graded, len(instances))
    _print(summary, graded, out)
    if summary["error_instances"]:
        raise typer.Exit(EXIT_FAILED)


async def _grade(
    instances: list[SWEInstance],
    preds: list[Prediction],
    strict: bool,
    concurrency: int,
    spec: EnvironmentSpec,
    sandbox_root: str,
) -> list[Graded]:
    from megaflow.environment.config import LocalRuntimeConfig
    from megaflow.environment.factory import make_runtime

    def progress(g: Graded) -> None:
        r = g.report
        mark = (
            "[red]error[/]" if g.error else "empty" if r is None
            else "[green]resolved[/]" if r.resolved else "unresolved"
        )  # fmt: skip
        console.print(f"{mark} {g.prediction.instance_id}", highlight=False)

    runtime = make_runtime(LocalRuntimeConfig(root=sandbox_root))
    async with runtime:
        return await grade_predictions(
            runtime, instances, preds, strict, concurrency, spec, on_graded=progress
        )


def _write(
    out: Path, run_id: str, preds: list[Prediction], graded: list[Graded], total: int
) -> dict[str, object]:
    model = preds[0].model_name_or_path.replace("/", "__")
    for g in graded:
        folder = out / model / g.prediction.instance_id
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "report.json").write_text(json.dumps(instance_report(g), indent=2))
        if g.report is not None:
            (folder / "grade.json").write_text(g.report.model_dump_json(indent=2))
    summary = summary_report(total, graded)
    (out / f"{model}.{run_id}.json").write_text(json.dumps(summary, indent=2))
    return summary


def _print(summary: dict[str, object], graded: list[Graded], out: Path) -> None:
    submitted = int(str(summary["submitted_instances"]))
    resolved = int(str(summary["resolved_instances"]))
    table = Table(title=f"graded {submitted} predictions")
    table.add_column("figure")
    table.add_column("count", justify="right")
    for key in ("submitted", "completed", "resolved", "unresolved", "empty_patch", "error"):
        table.add_row(key.replace("_", " "), str(summary[f"{key}_instances"]))
    console.print(table)
    share = resolved / submitted if submitted else 0.0
    console.print(f"resolved {share:.1%} of submitted; reports under {out}", highlight=False)
    for g in graded:
        if g.error:
            console.print(f"[red]error[/] {g.prediction.instance_id}: {g.error}", highlight=False)

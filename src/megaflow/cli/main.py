"""The ``megaflow`` command line. Each group of commands lives in its own module."""

from __future__ import annotations

import typer

from megaflow import __version__
from megaflow.cli import (
    bench_cmd,
    cancel_cmd,
    config_cmd,
    dashboard_cmd,
    grade_cmd,
    inspect_cmd,
    logs_cmd,
    regrade_cmd,
    run_cmd,
    sandbox_cmd,
    serve_cmd,
    sim_cmd,
    status_cmd,
    tasks_cmd,
    top_cmd,
    train_group,
)
from megaflow.cli.common import console
from megaflow.cli.model_cmd import serve_model

app = typer.Typer(
    name="megaflow",
    help="MegaFlow: orchestrate LLM agents, sandboxes and model inference at scale.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's plain help: flags without a "<bool>" type column
)
app.add_typer(config_cmd.app, name="config")
app.add_typer(tasks_cmd.app, name="tasks")
app.add_typer(sandbox_cmd.app, name="sandbox")
app.command("run")(run_cmd.run)
train_group.register(app)  # train (run, plan, diagnose) and the plan alias
app.command("status")(status_cmd.status)
app.command("results")(inspect_cmd.results)
app.command("export")(inspect_cmd.export)
app.command("cancel")(cancel_cmd.cancel)
app.command("logs")(logs_cmd.logs)
app.command("grade")(grade_cmd.grade)
app.command("regrade")(regrade_cmd.regrade)
app.command("bench")(bench_cmd.bench)
app.command("top")(top_cmd.top)
app.command("dashboard")(dashboard_cmd.dashboard)
app.add_typer(sim_cmd.app, name="sim")
app.command("serve-model")(serve_model)
serve_cmd.register(app)  # serve, up, down, submit


@app.command()
def version() -> None:
    """Print the MegaFlow version."""
    console.print(f"megaflow {__version__}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()

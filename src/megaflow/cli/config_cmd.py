"""``megaflow config ...``: check run configs before any work starts."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from megaflow.cli.common import EXIT_BAD_INPUT, console, err_console
from megaflow.config import load_config
from megaflow.core.errors import ConfigError

app = typer.Typer(help="Validate and inspect run configs.", no_args_is_help=True)


@app.command("validate")
def validate(file: Path = typer.Argument(..., help="A run config (YAML).")) -> None:
    """Validate FILE: print each error's field path and reason, exit 2 if any."""
    try:
        cfg = load_config(file)
    except ConfigError as exc:
        table = Table(title=f"{file}: invalid config", show_lines=False)
        table.add_column("field", style="bold")
        table.add_column("problem")
        for path, reason in exc.errors:
            table.add_row(path, reason)
        err_console.print(table)
        err_console.print(str(exc).splitlines()[0], highlight=False)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    console.print(
        f"[green]ok[/] {file}: run {cfg.name!r}, tasks from {cfg.tasks.type}, "
        f"agent {cfg.agent.type}, model {cfg.model.type}, "
        f"runtime {cfg.environment.runtime.type}, policy {cfg.scheduler.policy.type}"
    )

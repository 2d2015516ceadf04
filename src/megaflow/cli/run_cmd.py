"""``megaflow run CONFIG``: the main job."""

from __future__ import annotations

from pathlib import Path

import typer

from megaflow.cli import config_cmd
from megaflow.cli.common import console


def run(config: Path = typer.Argument(..., help="A run config (YAML).")) -> None:
    """Run the job described by CONFIG on the embedded defaults."""
    console.print(
        "[yellow]note:[/] the agent and environment services are not built yet; "
        "`megaflow run` only validates the config for now."
    )
    config_cmd.validate(config)

"""``megaflow config ...``: check run configs, and the cluster configs of
``megaflow up | serve``, before any work starts.

A file is read as a cluster config when it has no ``tasks`` and only
cluster-config fields (``state_dir``, ``auth``, ``scheduler``, ...); as a run
config otherwise, so a run config that lost its ``tasks`` is told so.
"""

from __future__ import annotations

from pathlib import Path

import typer
import yaml
from rich.table import Table

from megaflow.cli.common import EXIT_BAD_INPUT, console, err_console
from megaflow.config import load_config
from megaflow.core.errors import ConfigError
from megaflow.rpc.config import SERVABLE, ClusterConfig, load_cluster_config

app = typer.Typer(help="Validate run and cluster configs.", no_args_is_help=True)


_CLUSTER_MAX_BYTES = 1 << 20  # a cluster config is a page; a larger file is read as a run


def _is_cluster(file: Path) -> bool:
    try:
        if file.stat().st_size > _CLUSTER_MAX_BYTES:
            return False
        data = yaml.safe_load(file.read_text())
    except (OSError, ValueError, RecursionError, yaml.YAMLError):
        return False  # not readable as YAML: the run config loader reports why
    return (
        isinstance(data, dict)
        and bool(data)
        and "tasks" not in data
        and set(data) <= set(ClusterConfig.model_fields)
    )


def _validate_cluster(file: Path) -> str:
    cfg = load_cluster_config(file)
    services = ", ".join(f"{s} :{cfg.endpoint(s).port}" for s in SERVABLE)
    return f"[green]ok[/] {file}: cluster config ({services}), state in {cfg.state_dir}"


@app.command("validate")
def validate(file: Path = typer.Argument(..., help="A run or cluster config (YAML).")) -> None:
    """Validate FILE: print each error's field path and reason, exit 2 if any."""
    try:
        if _is_cluster(file):
            console.print(_validate_cluster(file), highlight=False)
            return
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

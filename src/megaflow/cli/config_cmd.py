"""``megaflow config ...``: check run configs, and the cluster configs of
``megaflow up | serve``, before any work starts.

A file is read as a cluster config when it has no ``tasks`` nor ``train`` and only
cluster-config fields (``state_dir``, ``auth``, ``scheduler``, ...); as a run
config otherwise, so a run config that lost its ``tasks`` is told so. A run
config's task paths (``tasks.path``, ``train.train_split.path``,
``train.sets[N].path``, ``train.held_out.path``) must exist where a run looks for them: as given
(absolute, or from the working directory) or beside the config.
"""

from __future__ import annotations

from pathlib import Path

import typer
import yaml
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from megaflow.cli.common import EXIT_BAD_INPUT, console, err_console
from megaflow.config import load_config
from megaflow.config.loader import is_run_config
from megaflow.config.models import RunConfig
from megaflow.config.paths import resolve_path
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
        and not is_run_config(data)
        and set(data) <= set(ClusterConfig.model_fields)
    )


def _validate_cluster(file: Path) -> str:
    cfg = load_cluster_config(file)
    services = ", ".join(f"{s} :{cfg.endpoint(s).port}" for s in SERVABLE)
    return escape(f"{file}: cluster config ({services}), state in {cfg.state_dir}")


def missing_task_paths(cfg: RunConfig, config_dir: Path) -> list[tuple[str, str]]:
    """(field, problem) for each task path of ``cfg`` that a run would not find; `megaflow
    run` and `megaflow train` refuse such a config as `config validate` does."""
    paths: list[tuple[str, str | None]] = [("tasks.path", getattr(cfg.tasks, "path", None))]
    if cfg.train is not None:
        paths += [
            ("train.train_split.path", cfg.train.train_split.path),
            *[(f"train.sets[{n}].path", s.path) for n, s in enumerate(cfg.train.sets or [])],
            *cfg.train.held_out_paths(),
        ]
    out = []
    for field, given in paths:
        if given is None:
            continue
        if not resolve_path(given, config_dir).exists():
            out.append((field, f"{given} does not exist (looked from here and beside the config)"))
    return out


def _print_problems(file: Path, problems: list[tuple[str, str]]) -> None:
    table = Table(title=Text(f"{file}: invalid config"), show_lines=False)
    table.add_column("field", style="bold")
    table.add_column("problem")
    for path, reason in problems:  # plain text: a pattern's brackets are no markup
        table.add_row(Text(path), Text(reason))
    err_console.print(table)


@app.command("validate")
def validate(file: Path = typer.Argument(..., help="A run or cluster config (YAML).")) -> None:
    """Validate FILE: print each error's field path and reason, exit 2 if any."""
    try:
        if _is_cluster(file):
            console.print(f"[green]ok[/] {_validate_cluster(file)}", highlight=False)
            return
        cfg = load_config(file)
    except ConfigError as exc:
        _print_problems(file, exc.errors)
        err_console.print(str(exc).splitlines()[0], highlight=False, markup=False)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    missing = missing_task_paths(cfg, file.resolve().parent)
    if missing:
        _print_problems(file, missing)
        err_console.print(
            f"{file}: {len(missing)} task path(s) do not exist", highlight=False, markup=False
        )
        raise typer.Exit(EXIT_BAD_INPUT)
    tasks = cfg.tasks.type if cfg.tasks is not None else "train.sets"
    about = (
        f"{file}: run {cfg.name!r}, tasks from {tasks}, "
        f"agent {cfg.agent.type}, model {cfg.model.type}, "
        f"runtime {cfg.environment.runtime.type}, policy {cfg.scheduler.policy.type}"
    )
    console.print(f"[green]ok[/] {escape(about)}", highlight=False)

"""Helpers shared by CLI commands: consoles, exit codes, store access.

The inspection commands read the metadata store named by ``--db`` (a SQLite
file) or by ``--config``: a run config (its ``storage`` section) or a cluster
config (its scheduler's ``storage``), so PostgreSQL and MongoDB work too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from megaflow.core.errors import MegaFlowError
from megaflow.storage.abstract import MetadataStore

if TYPE_CHECKING:
    from megaflow.storage.config import MetadataConfig, StorageConfig

console = Console()
err_console = Console(stderr=True, soft_wrap=True)  # a message's paths stay whole on one line

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2

DEFAULT_DB = ".megaflow/megaflow.db"
DbOption = typer.Option(DEFAULT_DB, "--db", help="Metadata database (SQLite file).")
ConfigOption = typer.Option(
    None,
    "--config",
    "-c",
    help="A run or cluster config whose storage section names the metadata store "
    "(PostgreSQL, MongoDB, SQLite); instead of --db.",
)

T = TypeVar("T")


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    raise typer.Exit(code)


def storage_of(path: Path) -> StorageConfig:
    """The storage a run config (it has ``tasks`` or ``train``) or a cluster config
    (its scheduler's) names."""
    import yaml

    from megaflow.config.loader import is_run_config, load_config
    from megaflow.rpc.config import load_cluster_config

    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        data = None  # the loader reports it
    if is_run_config(data):
        return load_config(path).storage
    return load_cluster_config(path).scheduler.storage


def metadata_config(
    db: str, config: Path | None, hint: str = "run a job first or "
) -> MetadataConfig:
    """The metadata store of ``--config`` if given, else the SQLite file ``--db``."""
    from megaflow.storage.config import SqliteMetadataConfig

    try:
        cfg = storage_of(config).metadata if config is not None else SqliteMetadataConfig(path=db)
    except MegaFlowError as exc:
        fail(str(exc))
    if cfg.type == "memory":
        fail(f"{config}: storage.metadata is 'memory', which keeps nothing after its process")
    path = cfg.path if isinstance(cfg, SqliteMetadataConfig) else ":memory:"
    if path != ":memory:" and not Path(path).exists():
        fail(f"no MegaFlow database at {path}; {hint}pass --db PATH or --config FILE")
    return cfg


def with_store(
    db: str,
    fn: Callable[[MetadataStore], Awaitable[T]],
    config: Path | None = None,
    hint: str = "run a job first or ",
) -> T:
    """Open the metadata store of ``config`` (or the SQLite file ``db``), run ``fn`` on it,
    close it."""
    from megaflow.storage.factory import make_metadata_store

    store = make_metadata_store(metadata_config(db, config, hint))

    async def go() -> T:
        async with store:
            return await fn(store)

    try:
        return asyncio.run(go())
    except MegaFlowError as exc:
        fail(str(exc))

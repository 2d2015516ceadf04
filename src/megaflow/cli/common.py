"""Helpers shared by CLI commands: consoles, exit codes, store access."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import NoReturn, TypeVar

import typer
from rich.console import Console

from megaflow.core.errors import MegaFlowError
from megaflow.storage.abstract import MetadataStore

console = Console()
err_console = Console(stderr=True)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2

DEFAULT_DB = ".megaflow/megaflow.db"
DbOption = typer.Option(DEFAULT_DB, "--db", help="Metadata database (SQLite file).")

T = TypeVar("T")


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    err_console.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(code)


def with_store(db: str, fn: Callable[[MetadataStore], Awaitable[T]]) -> T:
    """Open the metadata store at ``db``, run ``fn`` on it, close it."""
    if db != ":memory:" and not Path(db).exists():
        fail(f"no MegaFlow database at {db}; run a job first or pass --db PATH")

    async def go() -> T:
        from megaflow.storage.sqlite import SqliteMetadataStore

        async with SqliteMetadataStore(db) as store:
            return await fn(store)

    try:
        return asyncio.run(go())
    except MegaFlowError as exc:
        fail(str(exc))

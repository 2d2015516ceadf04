"""Shared by the benchmarks: print a rich table and write it as markdown.

Each benchmark writes ``benchmarks/results/<name>.md``; ``megaflow bench``
gathers them into ``benchmarks/RESULTS.md`` with the date and the machine.
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> str:
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    py = platform.python_version()
    return f"{platform.machine()}, {os.cpu_count()} cores, {mem_gib:.0f} GiB, Python {py}"


def report(
    name: str, title: str, columns: list[str], rows: list[list[str]], notes: str = ""
) -> None:
    table = Table(title=title)
    for col in columns:
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    Console().print(table)
    if notes:
        Console().print(notes)
    RESULTS.mkdir(exist_ok=True)
    lines = [
        f"## {title}",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {machine()}.",
        "",
        "| " + " | ".join(columns) + " |",
        "|" + "---|" * len(columns),
        *("| " + " | ".join(row) + " |" for row in rows),
        "",
    ]
    if notes:
        lines += [notes, ""]
    (RESULTS / f"{name}.md").write_text("\n".join(lines))

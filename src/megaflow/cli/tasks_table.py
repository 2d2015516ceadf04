"""The table of ``megaflow tasks ls``, fitted to the terminal.

Every column but the issue keeps its whole values (the instance id folds
only when it alone is wider than the terminal allows); the issue's first
line takes what is left and is cut with an ellipsis. When the issue would
get fewer than :data:`MIN_ISSUE` columns and every instance id already
names its repository (SWE-bench's ``owner__name-N``), the repo column is
left out and the title says so.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table

MIN_ISSUE = 20


def _borders(columns: int) -> int:
    return 3 * columns + 1  # "│ " before each column, " │" after the last


def _repo_in_id(row: dict[str, Any]) -> bool:
    return str(row["instance_id"]).startswith(str(row["repo"]).replace("/", "__") + "-")


def ls_table(title: str, rows: list[dict[str, Any]], width: int) -> Table:
    ids = [str(r["instance_id"]) for r in rows]
    fixed = {
        "repo": max([4, *(len(str(r["repo"])) for r in rows)]),
        "source": max([6, *(len(str(r["source"]["type"])) for r in rows)]),
        "F2P": max([3, *(len(str(r["fail_to_pass"])) for r in rows)]),
        "P2P": max([3, *(len(str(r["pass_to_pass"])) for r in rows)]),
    }
    id_len = max([8, *(len(i) for i in ids)])

    def room(cols: dict[str, int]) -> int:
        return width - _borders(len(cols) + 2) - sum(cols.values()) - id_len

    if room(fixed) < MIN_ISSUE and rows and all(_repo_in_id(r) for r in rows):
        del fixed["repo"]
        title += " (repo: the id's owner__name)"
    issue = room(fixed)
    instance = id_len
    if issue < MIN_ISSUE:  # the id gives way down to half the line, the issue to 8
        instance = max(12, id_len - (MIN_ISSUE - issue), width // 2 - 4)
        instance = min(instance, id_len)
        issue = max(8, width - _borders(len(fixed) + 2) - sum(fixed.values()) - instance)
    table = Table(title=title)
    table.add_column("instance", style="bold", overflow="fold", width=instance)
    for name, w in fixed.items():
        table.add_column(name, no_wrap=True, width=w, justify="right" if w <= 3 else "left")
    table.add_column("issue", no_wrap=True, overflow="ellipsis", width=issue)
    for r in rows:
        cells = {
            "repo": str(r["repo"]),
            "source": str(r["source"]["type"]),
            "F2P": str(r["fail_to_pass"]),
            "P2P": str(r["pass_to_pass"]),
        }
        table.add_row(r["instance_id"], *(cells[k] for k in fixed), r["issue"])
    return table

"""Tables that honour the terminal's width: as they are when they fit, turned on
their side when they do not.

A simulation report has a dozen figures per policy; at 80 columns a table
with a column per figure squeezes every value to an ellipsis. Turned, it has
a row per figure and a column per policy, which fits a few policies in 80
columns with every value whole.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table


def natural_width(header: Sequence[str], rows: Sequence[Sequence[str]]) -> int:
    """The width of a table with every header and cell on one line, borders included."""
    cells = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(header)]
    return sum(cells) + 3 * len(cells) + 1


def fitted(
    title: str,
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    console: Console,
    keys: int = 1,
) -> Table:
    """A table of ``rows`` under ``header``; turned (a row per header entry, a column per
    row, named by its first ``keys`` cells) when it is wider than ``console``."""
    table = Table(title=title)
    for i, name in enumerate(header):
        table.add_column(name, no_wrap=i < keys, justify="left" if i < keys else "right")
    for row in rows:
        table.add_row(*row)
    if natural_width(header, rows) <= console.width:
        return table
    # a turned table of one or two policies is narrow: its title keeps to one line
    turned = Table(title=title, min_width=min(len(title), console.width))
    turned.add_column("", no_wrap=True)
    for row in rows:
        turned.add_column(" / ".join(row[:keys]), justify="right", overflow="fold")
    for i, name in enumerate(header[keys:], keys):
        turned.add_row(name, *(row[i] for row in rows))
    return turned

"""Runs listed a block each, for a terminal too narrow for a table with the run id in
a column.

A run id, even as its shortest unique prefix, can be 40 characters
(``train-quickstart-kinds-20261205-083014-d2``: runs started in the same
second share all but their random tail). Beside it, a table of counts has
little room left at 80 columns, and rich then squeezes every column to an
ellipsis or drops the last ones. ``status`` and ``top`` show the table while
it fits whole (:func:`table_width`); when it does not, each run gets a line
of its own, and its rows (one per task type) go beneath it, indented: as
aligned columns under one header (``top``, whose columns are few), or as a
sentence of counts that wraps at the width (``status``, a column per
outcome). No run id is cut or wrapped, no figure is dropped.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, field

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

INDENT = "  "


@dataclass
class Block:
    """One run: its id as shown, a note beside it (``driver gone``), its rows."""

    label: str
    note: str = ""
    rows: list[list[str]] = field(default_factory=list)
    """Each row: its task type ("" for a run of one type), then its cells."""


def table_width(table: Table) -> int:
    """The width ``table`` takes with no cell wrapped or cut, borders included."""
    wide = Console(width=10_000, file=io.StringIO())
    return Measurement.get(wide, wide.options, table).maximum


def _head(block: Block, width: int) -> Text:
    """The run's own line: its id, and its note in bold red (on the next line when
    both do not fit, so the id stays whole)."""
    line = Text(block.label, no_wrap=True, overflow="fold")
    if block.note:
        gap = " " if len(block.label) + 1 + len(block.note) <= width else "\n" + INDENT
        line.append(gap).append(block.note, style="bold red")
    return line


def columns(header: Sequence[str], blocks: Sequence[Block], width: int) -> list[Text]:
    """A header line, then per run its id and its rows as columns beneath it: the type
    left-aligned, every other cell right-aligned, each column as wide as its widest."""
    cells = [header, *(row for b in blocks for row in b.rows)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        first = row[0].ljust(widths[0])
        rest = (c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True))
        return (INDENT + "  ".join([first, *rest])).rstrip()

    out = [Text(line(header), style="bold")]
    for b in blocks:
        out.append(_head(b, width))
        out.extend(Text(line(row)) for row in b.rows)
    return out


def wrap_items(lead: str, items: Sequence[str], width: int) -> str:
    """``lead`` then ``items`` joined by ", ", wrapped at ``width`` between items (an item
    is never split), continuation lines indented under the first item."""
    hang = " " * len(lead)
    lines, line = [], lead
    for n, item in enumerate(items):
        piece = item + ("," if n < len(items) - 1 else "")
        if line.strip() and len(line) + 1 + len(piece) > width and line != lead:
            lines.append(line)
            line = hang + piece
        else:
            line += ("" if line == lead else " ") + piece
    lines.append(line)
    return "\n".join(lines)


def sentences(blocks: Sequence[Block], width: int) -> list[Text]:
    """Per run its id, then a line per row: the type, and its cells as a sentence
    (``64 of 256 tasks: queued 7, starting 8, unresolved 49``) wrapped at ``width``.
    A row's cells are its lead (the total) and then ``name count`` items."""
    kind_w = max((len(r[0]) for b in blocks for r in b.rows), default=0)
    out: list[Text] = []
    for b in blocks:
        out.append(_head(b, width))
        for kind, lead, *items in b.rows:
            start = INDENT + (kind.ljust(kind_w) + "  " if kind_w else "") + lead
            out.append(Text(wrap_items(start + ": ", items, width) if items else start))
    return out

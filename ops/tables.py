"""Tables an operator reads and copies from: an id is never cut.

Rich fits a table to the terminal by wrapping its columns and ellipsizing a word wider than its
column (`appr_a4f2bb3c…`), which leaves an id that names nothing when it is typed back. An id
column here is never wrapped and is as wide as its widest id, so the other columns give way
first (they fold a word wider than themselves rather than cut it: no cell is ellipsized). A
terminal too narrow for that gets the rows as lines instead, each whole (`print_table`)."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.table import Table
from rich.text import Text

NARROWEST = 3  # a folding column's narrowest useful width
BETWEEN = 3  # what a column adds to a table's width at most: padding and a rule


def id_column(table: Table, header: str, ids: Iterable[str]) -> None:
    """Add a column of ids to `table`, each shown whole (`ids`: the values it will hold)."""
    widest = max((len(i) for i in ids), default=0)
    table.add_column(header, no_wrap=True, min_width=max(widest, len(header)))


def text_column(table: Table, header: str) -> None:
    """Add a column that wraps to fit, folding a word wider than itself rather than cutting it."""
    table.add_column(header, overflow="fold")


def fits(table: Table, width: int) -> bool:
    """Whether `table` can be drawn `width` columns wide with its ids whole and every other
    column at least NARROWEST wide (narrower, rich would crop an id or drop a column's cells)."""
    need = sum((c.min_width or 0) if c.no_wrap else NARROWEST for c in table.columns)
    return need + BETWEEN * len(table.columns) + 1 <= width


def print_table(console: Console, table: Table, lines: Iterable[Text]) -> None:
    """`table` where it fits the console; else `lines` (a row each, its cells in order), each on
    a line the console never breaks (the terminal wraps it, losing nothing)."""
    if fits(table, console.width):
        console.print(table)
        return
    if table.title:
        console.print(table.title)
    for line in lines:
        console.print(line, soft_wrap=True)

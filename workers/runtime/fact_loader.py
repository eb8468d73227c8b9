"""Runs the lookups a round needs (`facts.needed`) in Postgres: one query per distinct lookup,
for all of its ids at once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import dict_row

from toolgate.store import batch

Found = dict[tuple[str, str], list[dict[str, Any]]]  # (lookup, id) -> its rows (facts.Facts)


async def fetch(conn: AsyncConnection[Any], wanted: Mapping[str, set[str]], for_update: bool = False) -> Found:
    """Run each lookup once for its ids (`for_update`: locking the rows, ids in sorted order, so
    two transactions lock them in the same order)."""
    found: Found = {}
    for lookup, ids in _lookups(wanted):
        query = lookup.rstrip().rstrip(";") + " ORDER BY 1 FOR UPDATE" if for_update else lookup
        async with conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(query, {"ids": ids})
            _found(found, lookup, await cur.fetchall())
    return found


def statements(wanted: Mapping[str, set[str]]) -> list[batch.Statement]:
    """The lookups as statements of a batch (`batch.run`), in the order `collect` reads them."""
    return [(lookup, {"ids": ids}) for lookup, ids in _lookups(wanted)]


def collect(wanted: Mapping[str, set[str]], results: Sequence[batch.Result]) -> Found:
    """What `statements(wanted)` found, from their results in a batch."""
    found: Found = {}
    for (lookup, _), result in zip(_lookups(wanted), results, strict=True):
        _found(found, lookup, result.dicts())
    return found


def _lookups(wanted: Mapping[str, set[str]]) -> list[tuple[str, list[str]]]:
    return [(lookup, sorted(ids)) for lookup, ids in sorted(wanted.items()) if ids]


def _found(found: Found, lookup: str, rows: Sequence[dict[str, Any]]) -> None:
    for row in rows:  # an id may be several tenants' (each its own): every row is kept
        found.setdefault((lookup, str(row["id"])), []).append(row)

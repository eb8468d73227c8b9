"""Runs the lookups a round needs (`facts.needed`) in Postgres: one query per distinct lookup,
for all of its ids at once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import dict_row


async def fetch(
    conn: AsyncConnection[Any], wanted: Mapping[str, set[str]], for_update: bool = False
) -> dict[tuple[str, str], dict[str, Any]]:
    """Run each lookup once for its ids (`for_update`: locking the rows, ids in sorted order, so
    two transactions lock them in the same order)."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for lookup, ids in sorted(wanted.items()):
        if not ids:
            continue
        query = lookup.rstrip().rstrip(";") + " ORDER BY 1 FOR UPDATE" if for_update else lookup
        async with conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(query, {"ids": sorted(ids)})
            for row in await cur.fetchall():
                found[(lookup, str(row["id"]))] = row
    return found

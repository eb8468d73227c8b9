"""Facts about the resources a batch of calls names, read in one round.

A contract names its lookups (tenant binding, state checks, semantic rules, before state):
one parameterized query per lookup, returning `id` and the columns the rules use, for the
ids in `%(ids)s`. A round collects every (lookup, id) its calls need and runs each distinct
lookup once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import dict_row

Facts = Mapping[tuple[str, str], Mapping[str, Any]]  # (lookup, id) -> row; absent: no such resource


def owned(row: Mapping[str, Any] | None, tenant_id: str) -> Mapping[str, Any] | None:
    """A fact about a tenant's own resource, or None: another tenant's resource is answered
    exactly as one that does not exist, so no answer tells whether it does."""
    if row is None or row.get("tenant_id", tenant_id) != tenant_id:
        return None
    return row


def needed(refs: Iterable[tuple[str, Any]]) -> dict[str, set[str]]:
    wanted: dict[str, set[str]] = defaultdict(set)
    for lookup, value in refs:
        if isinstance(value, str):
            wanted[lookup].add(value)
    return wanted


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
            await cur.execute(query, {"ids": sorted(ids)})  # type: ignore[arg-type]
            for row in await cur.fetchall():
                found[(lookup, str(row["id"]))] = row
    return found

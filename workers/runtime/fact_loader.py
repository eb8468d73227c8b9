"""Runs the lookups a round needs (`facts.needed`) in Postgres: one query per distinct lookup,
for all of its ids at once: one at a time (`fetch`), in a batch (`statements`, `collect`), or
queued in the caller's pipeline (`send`, `received`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from psycopg import AsyncConnection, AsyncCursor
from psycopg.rows import dict_row

from toolgate.store import batch

Found = dict[tuple[str, str], list[dict[str, Any]]]  # (lookup, id) -> its rows (facts.Facts)
Sent = list[tuple[str, AsyncCursor[dict[str, Any]]]]  # each lookup, and the cursor its rows arrive on


async def fetch(conn: AsyncConnection[Any], wanted: Mapping[str, set[str]]) -> Found:
    """Run each lookup once for its ids."""
    found: Found = {}
    for lookup, ids in _lookups(wanted):
        async with conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(lookup, {"ids": ids})
            _found(found, lookup, await cur.fetchall())
    return found


async def send(conn: AsyncConnection[Any], wanted: Mapping[str, set[str]], for_update: bool = False) -> Sent:
    """Queue each lookup for its ids in the caller's pipeline (`for_update`: locking the rows, ids
    in sorted order, so two transactions lock them in the same order); `received` reads them
    once it synced. Never prepared: after a statement the server refused, it skips the rest of
    the pipeline, a Parse included, and psycopg could take a skipped one for prepared."""
    sent: Sent = []
    for lookup, ids in _lookups(wanted):
        query = lookup.rstrip().rstrip(";") + " ORDER BY 1 FOR UPDATE" if for_update else lookup
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(query, {"ids": ids}, prepare=False)
        sent.append((lookup, cur))
    return sent


def answered(sent: Sent) -> bool:
    """Whether every lookup sent has its rows (none was refused, or skipped after a refusal)."""
    return all(cur.pgresult is not None for _, cur in sent)


async def received(sent: Sent) -> Found:
    """What the lookups `send` queued found."""
    found: Found = {}
    for lookup, cur in sent:
        _found(found, lookup, await cur.fetchall())
        await cur.close()
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

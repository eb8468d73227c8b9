"""toolgate.read_outcomes: the first final outcome of each read, by (tenant, call_id). Execution
reads them in phase A, to answer a copy of a read from its first outcome, and adds this round's in
phase B's transaction (workers/execution/reads.py); retention forgets them after the proposal
window."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

from toolgate.store.db import keyed

Ident = tuple[str, str]  # (tenant_id, call_id)

LOAD = """
SELECT tenant_id, call_id, request_hash, response FROM toolgate.read_outcomes
WHERE (tenant_id, call_id) IN (SELECT * FROM unnest(%b::text[], %b::text[]))
"""
STORE = """
INSERT INTO toolgate.read_outcomes (tenant_id, call_id, request_hash, response)
SELECT r.tenant_id, r.call_id, r.request_hash, r.response::jsonb
FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[]) AS r(tenant_id, call_id, request_hash, response)
ON CONFLICT (tenant_id, call_id) DO NOTHING
"""


@dataclass(frozen=True, slots=True)
class ReadOutcome:
    """A read's first final outcome: the hash of its request and the response it got."""

    tenant_id: str
    call_id: str
    request_hash: str
    response: dict[str, Any]

    @property
    def ident(self) -> Ident:
        return self.tenant_id, self.call_id


async def load(conn: AsyncConnection[Any], idents: list[Ident]) -> list[ReadOutcome]:
    """The stored outcomes of these reads (those that have one)."""
    cur = await keyed(conn, LOAD, ([i[0] for i in idents], [i[1] for i in idents]))
    return [ReadOutcome(*row) for row in await cur.fetchall()]


async def store(conn: AsyncConnection[Any], rows: list[tuple[str, str, str, str]]) -> None:
    """Keep reads' first outcomes, each (tenant_id, call_id, request_hash, the response's JSON
    text); a copy stored meanwhile keeps the first."""
    if rows:
        await conn.execute(STORE, [list(column) for column in zip(*rows, strict=True)])

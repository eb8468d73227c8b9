"""toolgate.calls: every call_id of a tenant, bound to the digest of the first proposal that used
it and the agent that sent it, with what proved it (migration 0036: the signing document whose
signature validation verified, the signature, its Merkle path, the argument text). Validation
registers a round's calls and reads the digests of those seen before
(workers/validation/callers.py); the MCP door reads when a call was registered (door/session.py,
`toolgate_call_status`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

from toolgate.store.db import columns, keyed

REGISTER = """
INSERT INTO toolgate.calls (tenant_id, call_id, proposal_digest, agent_id, signed_document, signature,
    signature_proof, arguments)
SELECT * FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[], %b::bytea[], %b::bytea[], %b::bytea[], %b::text[])
ON CONFLICT (tenant_id, call_id) DO NOTHING
RETURNING tenant_id, call_id, proposal_digest
"""
DIGESTS = """
SELECT tenant_id, call_id, proposal_digest FROM toolgate.calls
WHERE (tenant_id, call_id) IN (SELECT * FROM unnest(%b::text[], %b::text[]))
"""
REGISTERED = """
SELECT (extract(epoch FROM at) * 1000)::bigint FROM toolgate.calls WHERE tenant_id = %s AND call_id = %s
"""


@dataclass(frozen=True, slots=True)
class NewCall:
    """A call to register, with what proved it: the signing document validation verified and
    the agent's signature over it (or over the root `proof` leads to), and the argument text as
    it travelled (`storable`)."""

    tenant_id: str
    call_id: str
    proposal_digest: str
    agent_id: str
    signed_document: bytes
    signature: bytes
    proof: bytes | None
    arguments: str | None


def storable(text: str) -> str | None:
    """`text` if a Postgres text column holds it exactly; None for text with a NUL or bytes that
    are not UTF-8 (carried as lone surrogates): no such argument text is JSON, so validation
    refuses its call as unparseable, and the row keeps the document, whose `arguments_sha256`
    still names the text."""
    if "\x00" in text:
        return None
    try:
        text.encode()
    except UnicodeEncodeError:
        return None
    return text


@dataclass(frozen=True, slots=True)
class Bound:
    """A call_id of a tenant and the proposal digest it is bound to."""

    tenant_id: str
    call_id: str
    proposal_digest: str


async def register(conn: AsyncConnection[Any], calls: Sequence[NewCall]) -> list[Bound]:
    """Record these calls; those recorded now (a call_id bound before is left as it is)."""
    cur = await conn.execute(REGISTER, columns(NewCall, calls))
    return [Bound(*row) for row in await cur.fetchall()]


async def digests(conn: AsyncConnection[Any], calls: Sequence[tuple[str, str]]) -> list[Bound]:
    """The calls among these (tenant, call_id) that are bound, with their digests."""
    cur = await keyed(conn, DIGESTS, ([t for t, _ in calls], [c for _, c in calls]))
    return [Bound(*row) for row in await cur.fetchall()]


async def registered_at(conn: AsyncConnection[Any], tenant_id: str, call_id: str) -> int | None:
    """When the call was registered for the tenant (ms since the epoch), or None: no such call."""
    cur = await conn.execute(REGISTERED, (tenant_id, call_id))
    row = await cur.fetchone()
    return None if row is None else int(row[0])

"""Validation's reads and writes about callers: the registered agents a round's proposals name,
and the call_ids they use (one proposal digest per tenant and call_id).

One statement each for the whole round, each its own transaction (the handler's pool is in
autocommit mode; validation/handler.py says why that is safe).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from psycopg import AsyncConnection

from toolgate.store.db import keyed
from toolgate.trust.ed25519 import PublicKey
from toolgate.workers.validation.identity import AgentKey, RegisteredAgent

AGENTS = """
SELECT a.agent_id, a.tenant_id, a.scopes, a.status = 'active', k.key_id, k.public_key, k.status = 'active'
FROM toolgate.agents a LEFT JOIN toolgate.agent_keys k USING (agent_id)
WHERE a.agent_id = ANY(%b)
"""
REGISTER = """
INSERT INTO toolgate.calls (tenant_id, call_id, proposal_digest, agent_id)
SELECT * FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[])
ON CONFLICT (tenant_id, call_id) DO NOTHING
RETURNING tenant_id, call_id, proposal_digest
"""
DIGESTS = """
SELECT tenant_id, call_id, proposal_digest FROM toolgate.calls
WHERE (tenant_id, call_id) IN (SELECT * FROM unnest(%b::text[], %b::text[]))
"""

_KEYS: dict[bytes, PublicKey] = {}  # parsed once per process: a key's bytes never change meaning


def _public_key(raw: bytes) -> PublicKey:
    key = _KEYS.get(raw)
    if key is None:
        key = _KEYS[raw] = PublicKey(raw)
    return key


async def load_agents(conn: AsyncConnection[Any], agent_ids: Iterable[str]) -> dict[str, RegisteredAgent]:
    cur = await conn.execute(AGENTS, (sorted(set(agent_ids)),))
    heads: dict[str, tuple[str, frozenset[str], bool]] = {}
    keys: dict[str, dict[str, AgentKey]] = {}
    for agent_id, tenant_id, scopes, active, key_id, public_key, key_active in await cur.fetchall():
        heads[agent_id] = (tenant_id, frozenset(scopes), bool(active))
        if key_id is not None:
            keys.setdefault(agent_id, {})[key_id] = AgentKey(_public_key(bytes(public_key)), bool(key_active))
    return {a: RegisteredAgent(a, t, s, active, keys.get(a, {})) for a, (t, s, active) in heads.items()}


async def bound_digests(conn: AsyncConnection[Any], calls: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """The digest each of these (tenant, call_id) is bound to, for those bound at all."""
    if not calls:
        return {}
    cur = await keyed(conn, DIGESTS, ([t for t, _ in calls], [c for _, c in calls]))
    return {(tenant, call_id): digest for tenant, call_id, digest in await cur.fetchall()}


async def register_calls(
    conn: AsyncConnection[Any], calls: list[tuple[str, str, str, str]]
) -> tuple[dict[tuple[str, str], str], set[tuple[str, str]]]:
    """Record (tenant, call_id, digest, agent) for calls seen the first time; return the digest
    each (tenant, call_id) is bound to, the first one recorded winning, and which of them were
    bound before (copies of calls seen already). One statement when every call is new (the
    common case); a second only for call_ids seen before."""
    if not calls:
        return {}, set()
    columns = [list(column) for column in zip(*calls, strict=True)]
    cur = await conn.execute(REGISTER, columns)
    bound = {(tenant, call_id): digest for tenant, call_id, digest in await cur.fetchall()}
    seen = sorted({(tenant, call_id) for tenant, call_id, _, _ in calls} - bound.keys())
    bound.update(await bound_digests(conn, seen))
    return bound, set(seen)

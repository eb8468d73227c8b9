"""Validation's reads and writes about callers: the registered agents a round's proposals name,
and the call_ids they use (one proposal digest per tenant and call_id).

One statement each for the whole round, each its own transaction (the handler's pool is in
autocommit mode; validation/handler.py says why that is safe).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from psycopg import AsyncConnection

from toolgate.schemas.models import ToolProposal
from toolgate.store import agents
from toolgate.store import calls as calls_store
from toolgate.trust.ed25519 import PublicKey
from toolgate.workers.validation.identity import AgentKey, Proven, RegisteredAgent

_KEYS: dict[bytes, PublicKey] = {}  # parsed once per process: a key's bytes never change meaning


def _public_key(raw: bytes) -> PublicKey:
    key = _KEYS.get(raw)
    if key is None:
        key = _KEYS[raw] = PublicKey(raw)
    return key


def new_call(proposal: ToolProposal, identity: Proven) -> calls_store.NewCall:
    """A proven proposal as toolgate.calls keeps it: the document its signature verified over
    (passed on from identity.authenticate, never encoded again), the signature, the Merkle path
    when its agent signed a batch at once, and the argument text as it travelled."""
    return calls_store.NewCall(
        identity.tenant_id,
        proposal.call_id,
        identity.digest,
        proposal.principal.agent_id,
        identity.document,
        proposal.signature or b"",
        proposal.signature_proof,
        calls_store.storable(proposal.arguments),
    )


async def load_agents(conn: AsyncConnection[Any], agent_ids: Iterable[str]) -> dict[str, RegisteredAgent]:
    heads: dict[str, tuple[str, frozenset[str], bool]] = {}
    keys: dict[str, dict[str, AgentKey]] = {}
    for row in await agents.with_keys(conn, sorted(set(agent_ids))):
        heads[row.agent_id] = (row.tenant_id, frozenset(row.scopes), bool(row.active))
        if row.key_id is not None and row.public_key is not None:
            key = AgentKey(_public_key(bytes(row.public_key)), bool(row.key_active))
            keys.setdefault(row.agent_id, {})[row.key_id] = key
    return {a: RegisteredAgent(a, t, s, active, keys.get(a, {})) for a, (t, s, active) in heads.items()}


async def bound_digests(conn: AsyncConnection[Any], calls: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """The digest each of these (tenant, call_id) is bound to, for those bound at all."""
    if not calls:
        return {}
    return {(b.tenant_id, b.call_id): b.proposal_digest for b in await calls_store.digests(conn, calls)}


async def register_calls(
    conn: AsyncConnection[Any], calls: list[calls_store.NewCall]
) -> tuple[dict[tuple[str, str], str], set[tuple[str, str]]]:
    """Record each call seen the first time, with what proved it; return the digest
    each (tenant, call_id) is bound to, the first one recorded winning, and which of them were
    bound before (copies of calls seen already). One statement when every call is new (the
    common case); a second only for call_ids seen before."""
    if not calls:
        return {}, set()
    bound = {(b.tenant_id, b.call_id): b.proposal_digest for b in await calls_store.register(conn, calls)}
    seen = sorted({(c.tenant_id, c.call_id) for c in calls} - bound.keys())
    bound.update(await bound_digests(conn, seen))
    return bound, set(seen)

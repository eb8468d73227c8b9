"""toolgate.agents, toolgate.agent_keys and toolgate.agent_tokens: the registered agents, their
public keys and the MCP door's bearer tokens. Operators write them (ops/agents.py registers,
rotates and revokes agents and keys, ops/agent_tokens.py issues and revokes tokens); validation
reads the agents a round's proposals name, with their keys (workers/validation/callers.py); the
door reads which agent a token belongs to (ops/agent_tokens.py `agent_of`)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection, Connection

from toolgate.store.batch import Statement

WITH_KEYS = """
SELECT a.agent_id, a.tenant_id, a.scopes, a.status = 'active', k.key_id, k.public_key, k.status = 'active'
FROM toolgate.agents a LEFT JOIN toolgate.agent_keys k USING (agent_id)
WHERE a.agent_id = ANY(%b)
"""
AGENT = "SELECT tenant_id, status FROM toolgate.agents WHERE agent_id = %s"
AGENT_FOR_UPDATE = AGENT + " FOR UPDATE"
SCOPES = "SELECT scopes FROM toolgate.agents WHERE agent_id = %s"
# An agent or key registered again keeps its status: the conflict updates only an active row, so a
# revoked one returns nothing and is never made active again (the caller refuses).
INSERT_AGENT = """
INSERT INTO toolgate.agents (agent_id, tenant_id, scopes) VALUES (%s, %s, %s)
ON CONFLICT (agent_id) DO UPDATE SET scopes = excluded.scopes
WHERE toolgate.agents.tenant_id = excluded.tenant_id AND toolgate.agents.status = 'active'
RETURNING agent_id
"""
INSERT_KEY = """
INSERT INTO toolgate.agent_keys (agent_id, key_id, public_key) VALUES (%s, %s, %s)
ON CONFLICT (agent_id, key_id) DO UPDATE SET public_key = toolgate.agent_keys.public_key
WHERE toolgate.agent_keys.status = 'active'
RETURNING key_id
"""
REVOKE_KEYS = (
    "UPDATE toolgate.agent_keys SET status = 'revoked', revoked_at = now() WHERE agent_id = %s AND status = 'active'"
)
REVOKE_KEY = REVOKE_KEYS + " AND key_id = %s"
REVOKE_AGENT = (
    "UPDATE toolgate.agents SET status = 'revoked', revoked_at = now() WHERE agent_id = %s AND status = 'active'"
)
REVOKE_TOKENS = (
    "UPDATE toolgate.agent_tokens SET status = 'revoked', revoked_at = now() WHERE agent_id = %s AND status = 'active'"
)
REVOKE_TOKEN = REVOKE_TOKENS + " AND token_id = %s"
REVOKE_TOKENS_RETURNING = REVOKE_TOKENS + " RETURNING token_id"
LIST = """
SELECT a.agent_id, a.tenant_id, a.scopes, a.status, a.created_at,
       coalesce(array_agg(k.key_id ORDER BY k.created_at) FILTER (WHERE k.status = 'active'), '{}'),
       coalesce(array_agg(k.key_id ORDER BY k.created_at) FILTER (WHERE k.status = 'revoked'), '{}')
FROM toolgate.agents a LEFT JOIN toolgate.agent_keys k USING (agent_id)
GROUP BY a.agent_id ORDER BY a.tenant_id, a.agent_id
"""
INSERT_TOKEN = "INSERT INTO toolgate.agent_tokens (token_hash, token_id, agent_id) VALUES (%s, %s, %s)"
AGENT_OF = """
SELECT t.agent_id, a.tenant_id FROM toolgate.agent_tokens t JOIN toolgate.agents a USING (agent_id)
WHERE t.token_hash = %s AND t.status = 'active' AND a.status = 'active'
"""
TOKENS = """
SELECT token_id, status, created_at, revoked_at FROM toolgate.agent_tokens WHERE agent_id = %s
ORDER BY created_at, token_id
"""


@dataclass(frozen=True, slots=True)
class AgentKey:
    """A registered agent and one of its keys (none: the agent has no key): as validation reads
    them, with whether each is active."""

    agent_id: str
    tenant_id: str
    scopes: list[str]
    active: bool
    key_id: str | None
    public_key: bytes | None
    key_active: bool | None


@dataclass(frozen=True, slots=True)
class Registration:
    """An agent's tenant and status."""

    tenant_id: str
    status: str


@dataclass(frozen=True, slots=True)
class Listed:
    """An agent as operators list it, with its active and revoked key ids, oldest first."""

    agent_id: str
    tenant_id: str
    scopes: list[str]
    status: str
    created_at: dt.datetime
    active_keys: list[str]
    revoked_keys: list[str]


@dataclass(frozen=True, slots=True)
class Token:
    """An agent's token, by its id (never the token)."""

    token_id: str
    status: str
    created_at: dt.datetime
    revoked_at: dt.datetime | None


async def with_keys(conn: AsyncConnection[Any], agent_ids: Sequence[str]) -> list[AgentKey]:
    """These agents, a row per key."""
    cur = await conn.execute(WITH_KEYS, (agent_ids,))
    return [AgentKey(*row) for row in await cur.fetchall()]


def registration(conn: Connection[Any], agent_id: str) -> Registration | None:
    row = conn.execute(AGENT, (agent_id,)).fetchone()
    return Registration(str(row[0]), str(row[1])) if row else None


async def locked(conn: AsyncConnection[Any], agent_id: str) -> Registration | None:
    """The agent's registration, locked until the transaction ends."""
    row = await (await conn.execute(AGENT_FOR_UPDATE, (agent_id,))).fetchone()
    return Registration(str(row[0]), str(row[1])) if row else None


def scopes(conn: Connection[Any], agent_id: str) -> list[str]:
    [(granted,)] = conn.execute(SCOPES, (agent_id,)).fetchall()
    return list(granted)


async def insert(conn: AsyncConnection[Any], agent_id: str, tenant: str, scopes: list[str]) -> bool:
    """Register an agent, or change an active one's scopes; False for a revoked agent."""
    cur = await conn.execute(INSERT_AGENT, (agent_id, tenant, scopes))
    return await cur.fetchone() is not None


async def insert_key(conn: AsyncConnection[Any], agent_id: str, key_id: str, public_key: bytes) -> bool:
    """Add a key to an agent (an active one it has already is kept); False for a revoked key."""
    cur = await conn.execute(INSERT_KEY, (agent_id, key_id, public_key))
    return await cur.fetchone() is not None


async def revoke_key(conn: AsyncConnection[Any], agent_id: str, key_id: str) -> int:
    """Revoke one active key; how many were (0 or 1)."""
    return (await conn.execute(REVOKE_KEY, (agent_id, key_id))).rowcount


async def revoke_agent(conn: AsyncConnection[Any], agent_id: str) -> tuple[int, list[str]]:
    """Revoke an agent with its active keys and tokens: how many keys, and the token ids, sorted."""
    keys = (await conn.execute(REVOKE_KEYS, (agent_id,))).rowcount
    await conn.execute(REVOKE_AGENT, (agent_id,))
    cur = await conn.execute(REVOKE_TOKENS_RETURNING, (agent_id,))
    return keys, sorted(str(r[0]) for r in await cur.fetchall())


def listed(conn: Connection[Any]) -> list[Listed]:
    """Every agent, by tenant and id."""
    return [Listed(*row) for row in conn.execute(LIST).fetchall()]


def issue_token(token_hash: str, token_id: str, agent_id: str) -> Statement:
    return INSERT_TOKEN, (token_hash, token_id, agent_id)


def revoke_tokens(agent_id: str, token_id: str | None) -> Statement:
    """Revoke an agent's active tokens, or the one with `token_id`."""
    return (REVOKE_TOKEN, (agent_id, token_id)) if token_id else (REVOKE_TOKENS, (agent_id,))


async def agent_of(conn: AsyncConnection[Any], token_hash: str) -> tuple[str, str] | None:
    """(agent_id, tenant_id) of an active token of an active agent, by the token's hash."""
    row = await (await conn.execute(AGENT_OF, (token_hash,))).fetchone()
    return (str(row[0]), str(row[1])) if row else None


def tokens(conn: Connection[Any], agent_id: str) -> list[Token]:
    """An agent's tokens, oldest first."""
    return [Token(*row) for row in conn.execute(TOKENS, (agent_id,)).fetchall()]

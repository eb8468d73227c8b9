"""Bearer tokens for the MCP front door over HTTP: each names one registered agent.

`issue` makes a token (shown once, to the operator), stores only its SHA-256 and writes an audit row
in the same transaction; `revoke` retires an agent's tokens (or one, by its token id), whether the
agent is active or revoked; `listed` shows an agent's tokens by id and status; `agent_of` is what
the door asks of every HTTP request: which active agent of an active registration a token belongs
to, or None. Revoking an agent revokes its tokens in the same transaction (ops/agents.py), and a
revoked agent is never active again, so a token issued before a revocation never works again. A
token is never logged, audited or stored: its id (the first characters of its hash) stands for it
everywhere.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import secrets
from typing import Any

import psycopg

from toolgate.ops.agents import REVOKE_TOKENS, RegistryError
from toolgate.settings import Settings
from toolgate.states import RegistryStatus
from toolgate.workers.runtime import audit

STAGE = "registry"
PREFIX = "tgmcp_"

INSERT = "INSERT INTO toolgate.agent_tokens (token_hash, token_id, agent_id) VALUES (%s, %s, %s)"
REVOKE = REVOKE_TOKENS
AGENT = "SELECT tenant_id, status FROM toolgate.agents WHERE agent_id = %s"
AGENT_OF = """
SELECT t.agent_id, a.tenant_id FROM toolgate.agent_tokens t JOIN toolgate.agents a USING (agent_id)
WHERE t.token_hash = %s AND t.status = 'active' AND a.status = 'active'
"""
LIST = """
SELECT token_id, status, created_at, revoked_at FROM toolgate.agent_tokens WHERE agent_id = %s
ORDER BY created_at, token_id
"""


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_id(token: str) -> str:
    return "tok_" + token_hash(token)[:12]


async def _audited(url: str, statement: tuple[str, Any], entry: audit.Entry) -> int:
    async with await psycopg.AsyncConnection.connect(url) as conn, conn.transaction():
        cur = await conn.execute(*statement)
        await audit.append(conn, [entry])
        return cur.rowcount


def _registered(settings: Settings, agent_id: str, active: bool) -> str:
    """The tenant of a registered agent (an active one, when `active`)."""
    with psycopg.connect(settings.database_url) as conn:
        row = conn.execute(AGENT, (agent_id,)).fetchone()
    if row is None or (active and row[1] != RegistryStatus.ACTIVE):
        raise RegistryError(f"no {'active ' if active else ''}agent {agent_id}")
    return str(row[0])


def issue(settings: Settings, agent_id: str, actor: str = "operator") -> tuple[str, str]:
    """A new token for an active agent: (the token, its id). The token is not kept anywhere."""
    tenant = _registered(settings, agent_id, active=True)
    token = PREFIX + secrets.token_urlsafe(32)
    detail = {"agent": agent_id, "token_id": token_id(token)}
    entry = audit.Entry(STAGE, "agent_token_issued", actor, None, tenant, detail)
    asyncio.run(_audited(settings.admin_url, (INSERT, (token_hash(token), token_id(token), agent_id)), entry))
    return token, token_id(token)


def revoke(settings: Settings, agent_id: str, revoked_id: str | None = None, actor: str = "operator") -> int:
    """Revoke an agent's active tokens (or the one with `revoked_id`), the agent active or
    revoked; how many were."""
    tenant = _registered(settings, agent_id, active=False)
    sql, params = (REVOKE + " AND token_id = %s", (agent_id, revoked_id)) if revoked_id else (REVOKE, (agent_id,))
    entry = audit.Entry(STAGE, "agent_token_revoked", actor, None, tenant, {"agent": agent_id, "token_id": revoked_id})
    return asyncio.run(_audited(settings.admin_url, (sql, params), entry))


def listed(settings: Settings, agent_id: str) -> list[dict[str, Any]]:
    """An agent's tokens (active or revoked, the agent active or revoked), by id: never the token."""
    _registered(settings, agent_id, active=False)
    with psycopg.connect(settings.database_url) as conn:
        rows = conn.execute(LIST, (agent_id,)).fetchall()
    return [
        {"token_id": r[0], "status": r[1], "created_at": _when(r[2]), "revoked_at": _when(r[3]) if r[3] else None}
        for r in rows
    ]


def _when(at: dt.datetime) -> str:
    return at.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


async def agent_of(conn: psycopg.AsyncConnection[Any], token: str) -> tuple[str, str] | None:
    """(agent_id, tenant_id) of an active token of an active agent; None for anything else."""
    cur = await conn.execute(AGENT_OF, (token_hash(token),))
    row = await cur.fetchone()
    return (str(row[0]), str(row[1])) if row else None

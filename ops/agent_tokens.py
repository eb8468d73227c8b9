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
import hashlib
import secrets
from typing import Any

import psycopg

from toolgate.ops.registry import RegistryError, as_listed, read
from toolgate.settings import Settings
from toolgate.states import RegistryStatus
from toolgate.store import agents, audit
from toolgate.store.batch import Statement

STAGE = "registry"
PREFIX = "tgmcp_"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_id(token: str) -> str:
    return "tok_" + token_hash(token)[:12]


async def _audited(url: str, statement: Statement, entry: audit.Entry) -> int:
    async with await psycopg.AsyncConnection.connect(url) as conn, conn.transaction():
        cur = await conn.execute(*statement)
        await audit.append(conn, [entry])
        return cur.rowcount


def _registered(settings: Settings, agent_id: str, active: bool) -> str:
    """The tenant of a registered agent (an active one, when `active`)."""
    registered = read(settings.database_url, agents.registration, agent_id)
    if registered is None or (active and registered.status != RegistryStatus.ACTIVE):
        raise RegistryError(f"no {'active ' if active else ''}agent {agent_id}")
    return registered.tenant_id


def issue(settings: Settings, agent_id: str, actor: str = "operator") -> tuple[str, str]:
    """A new token for an active agent: (the token, its id). The token is not kept anywhere."""
    tenant = _registered(settings, agent_id, active=True)
    token = PREFIX + secrets.token_urlsafe(32)
    detail = {"agent": agent_id, "token_id": token_id(token)}
    entry = audit.Entry(STAGE, "agent_token_issued", actor, None, tenant, detail)
    asyncio.run(_audited(settings.admin_url, agents.issue_token(token_hash(token), token_id(token), agent_id), entry))
    return token, token_id(token)


def revoke(settings: Settings, agent_id: str, revoked_id: str | None = None, actor: str = "operator") -> int:
    """Revoke an agent's active tokens (or the one with `revoked_id`), the agent active or
    revoked; how many were."""
    tenant = _registered(settings, agent_id, active=False)
    entry = audit.Entry(STAGE, "agent_token_revoked", actor, None, tenant, {"agent": agent_id, "token_id": revoked_id})
    return asyncio.run(_audited(settings.admin_url, agents.revoke_tokens(agent_id, revoked_id), entry))


def listed(settings: Settings, agent_id: str) -> list[dict[str, Any]]:
    """An agent's tokens (active or revoked, the agent active or revoked), by id: never the token."""
    _registered(settings, agent_id, active=False)
    return [as_listed(r) for r in read(settings.database_url, agents.tokens, agent_id)]


async def agent_of(conn: psycopg.AsyncConnection[Any], token: str) -> tuple[str, str] | None:
    """(agent_id, tenant_id) of an active token of an active agent; None for anything else."""
    return await agents.agent_of(conn, token_hash(token))

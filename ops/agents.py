"""Operator commands for tenants and agents: who may propose, for which tenant, with which scopes.

A tenant is registered once (`toolgate tenants add`); its edge topics are created then. Its own
mail domains, which Cedar policies compare an address's domain with, are set with `toolgate
tenants domains TENANT --set a.com,b.com` (none until then: every address is outside). An
agent belongs to one tenant, is granted scopes, and proves itself with Ed25519 keys: `agents
add` makes a key pair (the private key goes to the local keyring, the public key to Postgres)
or takes the public key of a key that never leaves the agent's host; `agents rotate` adds a
key beside the active ones; `agents revoke` retires one key, or the whole agent at once with its
MCP tokens (ops/agent_tokens.py). A revocation is final, as for approvers: a revoked agent or key
is never made active again (`agents add` refuses it: register a new id or key), so nothing issued
before the revocation works again. Every change is written to the hash-chained audit log, in the
same transaction.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import psycopg

from toolgate.kafka_security import ADMIN, client_config
from toolgate.ops.registry import RegistryError, as_listed, in_transaction, read
from toolgate.settings import Settings
from toolgate.states import RegistryStatus
from toolgate.store import agents, audit, tenants
from toolgate.topics.catalog import provision
from toolgate.trust.agent_keys import AgentKeyring, check_name, key_id_of, read_public_key
from toolgate.trust.signing import new_key, public_bytes

STAGE = "registry"


# --- tenants ---------------------------------------------------------------------------------


def registered_tenants(database_url: str) -> list[str]:
    with psycopg.connect(database_url) as conn:
        return tenants.listed(conn)


async def _insert_tenant(database_url: str, tenant: str, actor: str) -> None:
    async with await psycopg.AsyncConnection.connect(database_url) as conn, conn.transaction():
        if await tenants.insert(conn, tenant):
            await audit.append(conn, [audit.Entry(STAGE, "tenant_registered", actor, None, tenant, {})])


def add_tenant(settings: Settings, tenant: str, actor: str = "operator") -> list[str]:
    """Register a tenant (once) and create its edge topics; returns the topics created."""
    check_name("tenant", tenant)
    asyncio.run(_insert_tenant(settings.admin_url, tenant, actor))
    return provision(
        settings.kafka_bootstrap,
        settings.partitions,
        settings.topic_prefix,
        tenants=[tenant],
        client_config=client_config(settings, ADMIN),
    )


# A domain as an address's is compared: lower-case labels of letters, digits and inner hyphens.
LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
MAIL_DOMAIN = re.compile(rf"(?:{LABEL}\.)+{LABEL}")


def mail_domains(names: Iterable[str]) -> list[str]:
    """The mail domains named, as they are stored and compared: lower case, each once, in
    order; a name that is no domain (`acme`, `@acme.com`, `a..com`) is refused, naming it."""
    found: set[str] = set()
    for name in names:
        domain = name.strip().lower()
        if not domain:
            continue
        if len(domain) > 253 or not MAIL_DOMAIN.fullmatch(domain):
            raise RegistryError(f"{name.strip()!r} is not a mail domain (such as acme.example)")
        found.add(domain)
    return sorted(found)


def tenant_domains(database_url: str, tenant: str) -> list[str]:
    """A registered tenant's mail domains."""
    with psycopg.connect(database_url) as conn:
        found = tenants.domains_of(conn, [tenant])
    if tenant not in found:
        raise RegistryError(f"tenant {tenant} is not registered")
    return list(found[tenant])


def set_domains(settings: Settings, tenant: str, names: Iterable[str], actor: str = "operator") -> list[str]:
    """Set a tenant's own mail domains (audited, with those they replace); the policy stage
    judges with them from its next round. Returns them."""
    wanted = mail_domains(names)

    async def work(conn: psycopg.AsyncConnection[Any]) -> list[str]:
        before = await tenants.locked_domains(conn, tenant)
        if before is None:
            raise RegistryError(f"tenant {tenant} is not registered; run `toolgate tenants add {tenant}` first")
        await tenants.set_domains(conn, tenant, wanted)
        detail = {"domains": wanted, "previous_domains": list(before)}
        await audit.append(conn, [audit.Entry(STAGE, "tenant_domains_changed", actor, None, tenant, detail)])
        return wanted

    return in_transaction(settings.admin_url, work)


# --- agents ----------------------------------------------------------------------------------


def refusal(agent_id: str, tenant: str, registered: agents.Registration | None) -> str | None:
    """Why an agent may not be registered for `tenant` (None: it may), given the agent as it is
    registered, or None."""
    if registered is None:
        return None
    if registered.tenant_id != tenant:
        return f"agent {agent_id} belongs to tenant {registered.tenant_id}; an agent never changes tenant"
    if registered.status != RegistryStatus.ACTIVE:
        return f"agent {agent_id} was revoked, and a revocation is final: register the agent under a new id"
    return None


def register_agent(
    settings: Settings, agent_id: str, tenant: str, scopes: list[str], public_key: bytes, actor: str = "operator"
) -> str:
    """Record an agent, its granted scopes and one public key; returns the key id. Registering
    an active agent again changes its grant (and adds the key if it is new); a revoked agent, or
    a revoked key of an active one, is refused and stays revoked."""
    check_name("agent", agent_id)
    if tenant not in registered_tenants(settings.database_url):
        raise RegistryError(f"tenant {tenant} is not registered; run `toolgate tenants add {tenant}` first")
    key_id = key_id_of(public_key)
    detail = {"agent": agent_id, "scopes": sorted(scopes), "key_id": key_id}

    async def work(conn: psycopg.AsyncConnection[Any]) -> None:
        refused = refusal(agent_id, tenant, await agents.locked(conn, agent_id))
        if refused is not None:
            raise RegistryError(refused)
        if not await agents.insert(conn, agent_id, tenant, sorted(scopes)):  # revoked since it was read
            raise RegistryError(f"agent {agent_id} is not active, and a revocation is final")
        if not await agents.insert_key(conn, agent_id, key_id, public_key):
            raise RegistryError(
                f"key {key_id} of agent {agent_id} was revoked, and a revocation is final: register a new key"
            )
        await audit.append(conn, [audit.Entry(STAGE, "agent_registered", actor, None, tenant, detail)])

    in_transaction(settings.admin_url, work)
    return key_id


def add_agent(
    settings: Settings,
    agent_id: str,
    tenant: str,
    scopes: list[str],
    public_key_file: Path | None = None,
    actor: str = "operator",
) -> tuple[str, Path | None]:
    """Register an agent with a new key pair (private key into the local keyring) or with the
    public key in `public_key_file`. Returns the key id and where the private key is, if here."""
    if public_key_file is not None:
        public_key = read_public_key(public_key_file.read_bytes())
        return register_agent(settings, agent_id, tenant, scopes, public_key, actor), None
    key = new_key()
    key_id = register_agent(settings, agent_id, tenant, scopes, public_bytes(key), actor)
    _, path = AgentKeyring(settings.agents_dir).store(agent_id, tenant, scopes, key)
    return key_id, path


def rotate(
    settings: Settings, agent_id: str, public_key_file: Path | None = None, actor: str = "operator"
) -> tuple[str, Path | None]:
    """Add a key to an active agent; its other keys stay active until revoked."""
    with psycopg.connect(settings.database_url) as conn:
        agent = agents.registration(conn, agent_id)
    if agent is None or agent.status != RegistryStatus.ACTIVE:
        raise RegistryError(f"no active agent {agent_id}")
    with psycopg.connect(settings.database_url) as conn:
        scopes = agents.scopes(conn, agent_id)
    return add_agent(settings, agent_id, agent.tenant_id, scopes, public_key_file, actor)


def revoke(settings: Settings, agent_id: str, key_id: str | None = None, actor: str = "operator") -> int:
    """Revoke one key; or the agent with every key and MCP token it has, in one transaction, so
    its proposals stop verifying and its tokens stop opening the door at once, for good (an agent
    revoked before keeps no active token either). Returns how many keys were revoked."""

    async def work(conn: psycopg.AsyncConnection[Any]) -> int:
        registered = await agents.locked(conn, agent_id)
        if registered is None:
            raise RegistryError(f"no agent {agent_id}")
        tenant = registered.tenant_id
        if key_id is not None:
            count = await agents.revoke_key(conn, agent_id, key_id)
            if count == 0:
                raise RegistryError(f"agent {agent_id} has no active key {key_id}")
            revoked = {"agent": agent_id, "key_id": key_id}
            await audit.append(conn, [audit.Entry(STAGE, "agent_key_revoked", actor, None, tenant, revoked)])
            return int(count)
        keys, tokens = await agents.revoke_agent(conn, agent_id)
        entries = [audit.Entry(STAGE, "agent_revoked", actor, None, tenant, {"agent": agent_id, "key_id": None})]
        if tokens:
            detail: dict[str, Any] = {"agent": agent_id, "token_id": None, "token_ids": tokens, "with_agent": True}
            entries.append(audit.Entry(STAGE, "agent_token_revoked", actor, None, tenant, detail))
        await audit.append(conn, entries)
        return int(keys)

    return in_transaction(settings.admin_url, work)


def list_agents(settings: Settings) -> list[dict[str, Any]]:
    return [as_listed(r, agent_id="agent", tenant_id="tenant") for r in read(settings.database_url, agents.listed)]

"""toolgate.tenants: the registered tenants. Operators register them (ops/agents.py `add_tenant`)
and name them when they register an agent or an approver (ops/agents.py, ops/approvers.py);
normalization reads them to know which tenants have an observation topic.

A tenant's mail domains (migration 0025) are what Cedar policies see as its `domains`: operators
set them (ops/agents.py `set_domains`), and the policy stage reads the round's tenants' in its
round's batch (`domains_among`, read by `domains`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from psycopg import AsyncConnection, Connection

from toolgate.store import batch

ALL = "SELECT tenant_id FROM toolgate.tenants"
LISTED = "SELECT tenant_id FROM toolgate.tenants ORDER BY tenant_id"
REGISTERED = "SELECT tenant_id FROM toolgate.tenants WHERE tenant_id = ANY(%b)"
INSERT = "INSERT INTO toolgate.tenants (tenant_id) VALUES (%s) ON CONFLICT DO NOTHING RETURNING tenant_id"
# The mail domains of the round's tenants (policy's batch); an unregistered tenant has no row.
DOMAINS_AMONG = "SELECT tenant_id, domains FROM toolgate.tenants WHERE tenant_id = ANY(%b::text[])"
DOMAINS_LOCKED = "SELECT domains FROM toolgate.tenants WHERE tenant_id = %s FOR UPDATE"
SET_DOMAINS = "UPDATE toolgate.tenants SET domains = %b::text[] WHERE tenant_id = %s"

Domains = dict[str, tuple[str, ...]]  # tenant -> its mail domains, in order


async def every(conn: AsyncConnection[Any]) -> frozenset[str]:
    """Every registered tenant."""
    cur = await conn.execute(ALL)
    return frozenset(r[0] for r in await cur.fetchall())


def listed(conn: Connection[Any]) -> list[str]:
    """Every registered tenant, in order."""
    return [r[0] for r in conn.execute(LISTED)]


async def registered(conn: AsyncConnection[Any], tenants: Sequence[str]) -> set[str]:
    """Those of `tenants` that are registered."""
    cur = await conn.execute(REGISTERED, (tenants,))
    return {str(r[0]) for r in await cur.fetchall()}


async def insert(conn: AsyncConnection[Any], tenant: str) -> bool:
    """Register a tenant; False when it was registered already."""
    cur = await conn.execute(INSERT, (tenant,))
    return await cur.fetchone() is not None


def domains_among(tenants: Iterable[str]) -> batch.Statement:
    """The statement of a batch that reads these tenants' mail domains (`domains` reads its
    result)."""
    return DOMAINS_AMONG, (sorted(set(tenants)),)


def domains(result: batch.Result) -> Domains:
    """The mail domains of each tenant found; a tenant not in it (not registered) has none."""
    return _by_tenant(result.rows)


def domains_of(conn: Connection[Any], tenants: Sequence[str]) -> Domains:
    """The mail domains of each of `tenants` that is registered."""
    return _by_tenant(conn.execute(DOMAINS_AMONG, (list(tenants),)))


async def locked_domains(conn: AsyncConnection[Any], tenant: str) -> tuple[str, ...] | None:
    """A tenant's mail domains, its row locked until the caller's transaction ends; None when
    the tenant is not registered."""
    cur = await conn.execute(DOMAINS_LOCKED, (tenant,))
    row = await cur.fetchone()
    return tuple(row[0]) if row is not None else None


async def set_domains(conn: AsyncConnection[Any], tenant: str, names: Sequence[str]) -> None:
    """Set a registered tenant's mail domains (lower case: the table refuses others)."""
    await conn.execute(SET_DOMAINS, (list(names), tenant))


def _by_tenant(rows: Iterable[Sequence[Any]]) -> Domains:
    return {str(row[0]): tuple(row[1]) for row in rows}

"""toolgate.tenants: the registered tenants. Operators register them (ops/agents.py `add_tenant`)
and name them when they register an agent or an approver (ops/agents.py, ops/approvers.py);
normalization reads them to know which tenants have an observation topic."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import AsyncConnection, Connection

ALL = "SELECT tenant_id FROM toolgate.tenants"
LISTED = "SELECT tenant_id FROM toolgate.tenants ORDER BY tenant_id"
REGISTERED = "SELECT tenant_id FROM toolgate.tenants WHERE tenant_id = ANY(%b)"
INSERT = "INSERT INTO toolgate.tenants (tenant_id) VALUES (%s) ON CONFLICT DO NOTHING RETURNING tenant_id"


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

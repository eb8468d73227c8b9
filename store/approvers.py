"""toolgate.approvers: who may sign approval decisions, with which public key, for which risk
classes, groups and tenants, and which user ids each acts as (never counted on their calls).
Operators write it, as the tables' owner (ops/approvers.py); approval-wait reads the approvers
of a round's decisions (workers/approval/tickets.py), and ops/approvals.py whether an approver
serves a ticket's tenant. Execution's count of approvals joins it too (store/approvals.py)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection, Connection

from toolgate.store.rows import Approver as Approver  # an approver as approval-wait judges its decisions

DECIDING = """
SELECT approver_id, public_key, risk_classes, status = 'active', groups, tenants, acts_as FROM toolgate.approvers
WHERE approver_id = ANY(%b)
"""
INSERT = """
INSERT INTO toolgate.approvers (approver_id, public_key, risk_classes, groups, tenants, acts_as)
VALUES (%s, %s, %s, %s, %s, %s)
ON CONFLICT (approver_id) DO NOTHING RETURNING approver_id
"""
CURRENT = "SELECT status, public_key, tenants, acts_as FROM toolgate.approvers WHERE approver_id = %s FOR UPDATE"
ROTATE = "UPDATE toolgate.approvers SET public_key = %s WHERE approver_id = %s AND status = 'active'"
SERVE = "UPDATE toolgate.approvers SET tenants = %s WHERE approver_id = %s AND status = 'active'"
ACT_AS = "UPDATE toolgate.approvers SET acts_as = %s WHERE approver_id = %s AND status = 'active'"
REVOKE = "UPDATE toolgate.approvers SET status = 'revoked', revoked_at = now() WHERE approver_id = %s"
STATUS = "SELECT status FROM toolgate.approvers WHERE approver_id = %s"
SERVES = "SELECT %s = ANY(tenants) FROM toolgate.approvers WHERE approver_id = %s AND status = 'active'"
LIST = (
    "SELECT approver_id, status, risk_classes, groups, created_at, public_key, tenants, acts_as "
    "FROM toolgate.approvers ORDER BY approver_id"
)


@dataclass(frozen=True, slots=True)
class Current:
    """An approver's status, key, tenants and the users it acts as, as a change to it reads them."""

    status: str
    public_key: bytes
    tenants: list[str]
    acts_as: list[str]


@dataclass(frozen=True, slots=True)
class Listed:
    """An approver as operators list it."""

    approver_id: str
    status: str
    risk_classes: list[str]
    groups: list[str]
    created_at: dt.datetime
    public_key: bytes
    tenants: list[str]
    acts_as: list[str]


async def deciding(conn: AsyncConnection[Any], ids: list[str]) -> list[Approver]:
    """These approvers (those registered)."""
    cur = await conn.execute(DECIDING, (ids,))
    return [Approver(*row) for row in await cur.fetchall()]


async def status(conn: AsyncConnection[Any], approver_id: str) -> str | None:
    """The approver's status; None: no such approver."""
    row = await (await conn.execute(STATUS, (approver_id,))).fetchone()
    return None if row is None else str(row[0])


async def insert(
    conn: AsyncConnection[Any],
    approver_id: str,
    public_key: bytes,
    risk_classes: list[str],
    groups: list[str],
    tenants: list[str],
    acts_as: list[str],
) -> bool:
    """Register an approver; False when the id is registered already."""
    cur = await conn.execute(INSERT, (approver_id, public_key, risk_classes, groups, tenants, acts_as))
    return await cur.fetchone() is not None


async def current(conn: AsyncConnection[Any], approver_id: str) -> Current | None:
    """The approver as it is, locked until the transaction ends; None: no such approver."""
    row = await (await conn.execute(CURRENT, (approver_id,))).fetchone()
    return None if row is None else Current(*row)


async def rotate(conn: AsyncConnection[Any], approver_id: str, public_key: bytes) -> None:
    await conn.execute(ROTATE, (public_key, approver_id))


async def serve(conn: AsyncConnection[Any], approver_id: str, tenants: list[str]) -> None:
    await conn.execute(SERVE, (tenants, approver_id))


async def act_as(conn: AsyncConnection[Any], approver_id: str, users: list[str]) -> None:
    await conn.execute(ACT_AS, (users, approver_id))


async def revoke(conn: AsyncConnection[Any], approver_id: str) -> None:
    await conn.execute(REVOKE, (approver_id,))


def serves(conn: Connection[Any], approver_id: str, tenant_id: str) -> bool:
    """Whether the approver is active and decides for the tenant."""
    row = conn.execute(SERVES, (tenant_id, approver_id)).fetchone()
    return row is not None and bool(row[0])


def listed(conn: Connection[Any]) -> list[Listed]:
    """Every approver, by id."""
    return [Listed(*row) for row in conn.execute(LIST).fetchall()]

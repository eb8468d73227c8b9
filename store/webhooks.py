"""toolgate.webhooks and toolgate.webhook_deliveries (migration 0034): a tenant's endpoint, and the
deliveries the approval tables' triggers write in the transactions that open, vote on and close a
ticket.

The courier (workers/webhooks/courier.py) takes due deliveries under a lease (`claim`: their
attempt counted and their due time moved a lease ahead, so a courier that dies mid-POST leaves
them due again, and several couriers never post one at once), then settles each (`settle`); it
listens on `toolgate_webhooks` for new ones. The operators' commands (ops/webhooks.py) set,
remove and list endpoints and list deliveries.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection, Connection

LISTEN = "LISTEN toolgate_webhooks"
CLAIM = """
UPDATE toolgate.webhook_deliveries d
SET attempts = d.attempts + 1, due_at = now() + make_interval(secs => %(lease_s)s)
FROM (
    SELECT delivery_id FROM toolgate.webhook_deliveries
    WHERE status = 'pending' AND due_at <= now() ORDER BY delivery_id LIMIT %(limit)s FOR UPDATE SKIP LOCKED
) due
WHERE d.delivery_id = due.delivery_id
RETURNING d.delivery_id, d.tenant_id, d.event_type, d.approval_id, d.body, d.attempts,
    (SELECT w.url FROM toolgate.webhooks w WHERE w.tenant_id = d.tenant_id AND w.enabled)
"""
SETTLE = """
UPDATE toolgate.webhook_deliveries
SET status = %(status)s, last_outcome = %(outcome)s,
    due_at = CASE WHEN %(status)s = 'pending' THEN now() + make_interval(secs => %(after_s)s) ELSE due_at END,
    finished_at = CASE WHEN %(status)s = 'pending' THEN NULL ELSE now() END
WHERE delivery_id = %(delivery_id)s
"""
DISABLE = "UPDATE toolgate.webhooks SET enabled = false, updated_at = now() WHERE tenant_id = %s"
NEXT_DUE = "SELECT extract(epoch FROM min(due_at) - now()) FROM toolgate.webhook_deliveries WHERE status = 'pending'"
PRUNE = """
DELETE FROM toolgate.webhook_deliveries WHERE status <> 'pending' AND finished_at < now() - make_interval(secs => %s)
"""
LOCKED = "SELECT url, enabled FROM toolgate.webhooks WHERE tenant_id = %s FOR UPDATE"
UPSERT = """
INSERT INTO toolgate.webhooks (tenant_id, url) VALUES (%s, %s)
ON CONFLICT (tenant_id) DO UPDATE SET url = excluded.url, enabled = true, updated_at = now()
"""
DELETE = "DELETE FROM toolgate.webhooks WHERE tenant_id = %s"
LISTED = "SELECT tenant_id, url, enabled, updated_at FROM toolgate.webhooks ORDER BY tenant_id"
DELIVERIES = """
SELECT delivery_id, tenant_id, event_type, approval_id, status, attempts, last_outcome, created_at, due_at
FROM toolgate.webhook_deliveries
WHERE (%(tenant)s::text IS NULL OR tenant_id = %(tenant)s) AND (%(status)s::text IS NULL OR status = %(status)s)
ORDER BY delivery_id DESC LIMIT %(limit)s
"""


@dataclass(frozen=True)
class Due:
    delivery_id: int
    tenant_id: str
    event_type: str
    approval_id: str
    body: dict[str, Any]
    attempts: int  # this one included
    url: str | None  # None: the tenant's endpoint was removed or disabled since


@dataclass(frozen=True)
class Endpoint:
    tenant_id: str
    url: str
    enabled: bool
    updated_at: dt.datetime


@dataclass(frozen=True)
class Delivery:
    delivery_id: int
    tenant_id: str
    event_type: str
    approval_id: str
    status: str
    attempts: int
    last_outcome: str | None
    created_at: dt.datetime
    due_at: dt.datetime


async def listen(conn: AsyncConnection[Any]) -> None:
    """Be notified of every transaction that writes deliveries (on a connection in autocommit mode)."""
    await conn.execute(LISTEN)


async def claim(conn: AsyncConnection[Any], limit: int, lease_s: float) -> list[Due]:
    cur = await conn.execute(CLAIM, {"limit": limit, "lease_s": lease_s})
    return sorted((Due(*row) for row in await cur.fetchall()), key=lambda due: due.delivery_id)


async def settle(conn: AsyncConnection[Any], delivery_id: int, status: str, outcome: str, after_s: float = 0.0) -> None:
    """Record an attempt's end: `status` pending (tried again `after_s` from now), delivered,
    failed or dropped."""
    params = {"delivery_id": delivery_id, "status": status, "outcome": outcome, "after_s": after_s}
    await conn.execute(SETTLE, params)


async def disable(conn: AsyncConnection[Any], tenant: str) -> None:
    await conn.execute(DISABLE, (tenant,))


async def next_due_s(conn: AsyncConnection[Any]) -> float | None:
    """Seconds until the next pending delivery is due (negative: overdue); None: none pending."""
    cur = await conn.execute(NEXT_DUE)
    row = await cur.fetchone()
    return None if row is None or row[0] is None else float(row[0])


async def prune(conn: AsyncConnection[Any], retention_s: float) -> int:
    cur = await conn.execute(PRUNE, (retention_s,))
    return cur.rowcount


async def locked(conn: AsyncConnection[Any], tenant: str) -> tuple[str, bool] | None:
    """A tenant's endpoint and whether it is enabled, locked for a change; None: none set."""
    cur = await conn.execute(LOCKED, (tenant,))
    row = await cur.fetchone()
    return None if row is None else (str(row[0]), bool(row[1]))


async def upsert(conn: AsyncConnection[Any], tenant: str, url: str) -> None:
    await conn.execute(UPSERT, (tenant, url))


async def delete(conn: AsyncConnection[Any], tenant: str) -> None:
    await conn.execute(DELETE, (tenant,))


def listed(conn: Connection[Any]) -> list[Endpoint]:
    return [Endpoint(*row) for row in conn.execute(LISTED).fetchall()]


def deliveries(conn: Connection[Any], tenant: str | None, status: str | None, limit: int) -> list[Delivery]:
    params = {"tenant": tenant, "status": status, "limit": limit}
    return [Delivery(*row) for row in conn.execute(DELIVERIES, params).fetchall()]

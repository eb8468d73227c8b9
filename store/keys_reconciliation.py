"""toolgate.idempotency_keys, as reconciliation and `toolgate status` read and write it: the keys
a crash left PENDING, and the keys past their deduplication window.

The reconciler (workers/reconciliation/reconciler.py) reads the PENDING keys whose lease expired
(`lease_expired`), and later, in another transaction, locks each again only if it is still as read
(`still_stuck`) before it hands it over to a re-drive (`hand_over`) or settles it (`settle`); each
pass also marks keys past their window EXPIRED (`expire`). `toolgate status` and the gauges count
the PENDING keys and their age (`backlog`). Execution's own statements are store/keys.py's.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from toolgate.states import KeyStatus
from toolgate.store.db import one_row

STUCK = """
SELECT tenant_id, idempotency_key, executor, request, call_id, (extract(epoch FROM created_at) * 1000)::bigint,
    lease_owner, lease_until
FROM toolgate.idempotency_keys
WHERE status = 'PENDING' AND lease_until < now()
ORDER BY lease_until LIMIT %s FOR UPDATE SKIP LOCKED
"""
# The key is still as STUCK read it: PENDING under the same expired lease, so nobody settled,
# re-drove or took it over while its provider was asked.
STILL_STUCK = """
SELECT 1 FROM toolgate.idempotency_keys
WHERE tenant_id = %s AND idempotency_key = %s AND status = 'PENDING'
    AND lease_owner IS NOT DISTINCT FROM %s AND lease_until = %s
FOR UPDATE SKIP LOCKED
"""
HAND_OVER = """
UPDATE toolgate.idempotency_keys SET lease_owner = %s, lease_until = now() + make_interval(secs => %s)
WHERE tenant_id = %s AND idempotency_key = %s
"""
SETTLE = """
UPDATE toolgate.idempotency_keys SET status = %s, response = %s, error_code = %s, completed_at = now(),
    lease_owner = NULL, lease_until = NULL
WHERE tenant_id = %s AND idempotency_key = %s
"""
EXPIRE = """
UPDATE toolgate.idempotency_keys SET expired_from = status, status = 'EXPIRED'
WHERE (tenant_id, idempotency_key) IN (
    SELECT tenant_id, idempotency_key FROM toolgate.idempotency_keys
    WHERE expires_at < now() AND status IN ('COMPLETED', 'FAILED_RETRYABLE', 'FAILED_FINAL', 'COMPENSATED')
    LIMIT 5000 FOR UPDATE SKIP LOCKED)
"""
BACKLOG = """
SELECT count(*), extract(epoch FROM now() - min(created_at))::float8,
       count(*) FILTER (WHERE coalesce(lease_until, created_at) < now()),
       extract(epoch FROM now() - min(coalesce(lease_until, created_at)))::float8
FROM toolgate.idempotency_keys WHERE status = 'PENDING'
"""


@dataclass(frozen=True, slots=True)
class LeaseExpired:
    """A PENDING key whose lease expired, as the reconciler's first step reads it (locked only
    for that step's short transaction)."""

    tenant_id: str
    idempotency_key: str
    executor: str
    request: bytes  # the call's StageRecord, as received
    call_id: str
    created_at_ms: int
    lease_owner: str | None
    lease_until: dt.datetime


@dataclass(frozen=True, slots=True)
class Backlog:
    """The PENDING keys: how many, the oldest one's age, how many are past their lease (or, with
    none, their creation) and by how long the longest."""

    pending: int
    oldest_age_s: float | None
    lease_expired: int
    most_overdue_s: float | None


async def lease_expired(conn: AsyncConnection[Any], limit: int) -> list[LeaseExpired]:
    """Up to `limit` PENDING keys whose lease expired, the longest expired first, locked (keys a
    stage holds now are skipped)."""
    cur = await conn.execute(STUCK, (limit,))
    return [LeaseExpired(r[0], r[1], r[2], bytes(r[3]), r[4], r[5], r[6], r[7]) for r in await cur.fetchall()]


async def still_stuck(conn: AsyncConnection[Any], key: LeaseExpired) -> bool:
    """Whether the key is still PENDING under the lease `lease_expired` read, now locked (False:
    settled, re-driven or taken over since, or locked by whoever does)."""
    cur = await conn.execute(STILL_STUCK, (key.tenant_id, key.idempotency_key, key.lease_owner, key.lease_until))
    return await cur.fetchone() is not None


async def hand_over(conn: AsyncConnection[Any], tenant_id: str, key: str, owner: str, lease_s: float) -> None:
    """Lease the key to `owner` for `lease_s` (a re-driven call's execution takes it over)."""
    await conn.execute(HAND_OVER, (owner, lease_s, tenant_id, key))


async def settle(
    conn: AsyncConnection[Any],
    tenant_id: str,
    key: str,
    status: KeyStatus,
    response: dict[str, Any],
    error_code: str | None,
) -> None:
    """End the key: its status, the response a repeat replays, its error class; no lease."""
    await conn.execute(SETTLE, (status, Jsonb(response), error_code, tenant_id, key))


async def expire(conn: AsyncConnection[Any]) -> int:
    """Mark up to 5,000 ended keys past their deduplication window EXPIRED (keeping the status
    each had); how many."""
    cur = await conn.execute(EXPIRE)
    return cur.rowcount


def backlog(conn: psycopg.Connection[Any]) -> Backlog:
    """The PENDING keys, aged by Postgres's own `now()`."""
    return Backlog(*one_row(conn, BACKLOG))

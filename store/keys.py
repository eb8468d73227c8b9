"""toolgate.idempotency_keys, as execution reads and writes it: the key of every mutation, its
request, status, lease and stored response.

Phase A of a round (workers/execution/reservation.py) reserves new keys as PENDING (`reserve`),
locks the existing ones (`lock`), re-drives those the plan lets run again (`redrive`) and locks
the earlier calls compensations undo (`to_compensate`); a late call reads stored outcomes
(`outcomes`). Phase B (workers/execution/recording.py) settles each key (`settle`), or inserts a new
one with its end (`insert_settled`), and marks what compensations undid. `toolgate compensate`
finds a call's key (`executed`); the Postgres-only bench runs `LOCK` and `INSERT_SETTLED`.

A round's statements that find its keys in the table (`lock`, `outcomes`, `settle`, `redrive`,
`to_compensate`) take the keys as arrays and are planned on every execution, never prepared. A
worker connects when the table is nearly empty (a new deployment): a plan Postgres kept from then,
a hash join over a sequential scan, went on scanning the whole table on every round as it grew (until
autovacuum analyzed it, which a fresh server does not do in its first minute); and a JSON
recordset, which the planner takes for 100 rows whatever it holds, made even a fresh plan scan a
table of a few thousand keys. At 300 calls/s into a fresh `toolgate up`, the lock was the stage's
costliest statement (pg_stat_statements), the run read millions of rows, and Postgres took more
CPU a call than with the statements planned each time
(docs/performance.md, "Figures behind the code"). Planned for the table and the keys at hand,
each key is one index probe, for a little planning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import AsyncConnection, AsyncCursor

from toolgate.states import KeyStatus
from toolgate.store.db import keyed, rows_json
from toolgate.store.rows import KeyRow

Ident = tuple[str, str]  # (tenant_id, idempotency_key)

RESERVE = """
INSERT INTO toolgate.idempotency_keys (tenant_id, idempotency_key, request_hash, status, tool_name, tool_version,
    executor, call_id, home_partition, attempt, request, lease_owner, lease_until, expires_at)
SELECT k.tenant_id, k.idempotency_key, k.request_hash, 'PENDING', k.tool_name, k.tool_version, k.executor, k.call_id,
    k.home_partition, 1, k.request, %(owner)s, now() + make_interval(secs => %(lease)s),
    now() + make_interval(secs => k.ttl)
FROM unnest(%(tenant_id)b::text[], %(idempotency_key)b::text[], %(request_hash)b::text[], %(tool_name)b::text[],
    %(tool_version)b::text[], %(executor)b::text[], %(call_id)b::text[], %(home_partition)b::int[],
    %(request)b::bytea[], %(ttl)b::int[])
    AS k(tenant_id, idempotency_key, request_hash, tool_name, tool_version, executor, call_id, home_partition,
    request, ttl)
ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
RETURNING tenant_id, idempotency_key
"""
RESERVE_COLUMNS = (
    "tenant_id",
    "idempotency_key",
    "request_hash",
    "tool_name",
    "tool_version",
    "executor",
    "call_id",
    "home_partition",
    "request",
    "ttl",
)
LOCK = """
SELECT tenant_id, idempotency_key, status, request_hash, call_id, attempt, lease_owner,
       (extract(epoch FROM lease_until) * 1000)::bigint, response, error_code,
       (extract(epoch FROM expires_at) * 1000)::bigint, expired_from
FROM toolgate.idempotency_keys
WHERE (tenant_id, idempotency_key) IN (SELECT * FROM unnest(%b::text[], %b::text[]))
ORDER BY tenant_id, idempotency_key
FOR UPDATE
"""
OUTCOMES = """
SELECT tenant_id, idempotency_key, status, request_hash, response FROM toolgate.idempotency_keys
WHERE (tenant_id, idempotency_key) IN (SELECT * FROM unnest(%b::text[], %b::text[]))
"""
REDRIVE = """
UPDATE toolgate.idempotency_keys k SET status = 'PENDING', attempt = r.attempt, call_id = r.call_id,
    request = r.request, request_hash = r.request_hash, lease_owner = %(owner)s,
    lease_until = now() + make_interval(secs => %(lease)s), completed_at = NULL, expired_from = NULL,
    expires_at = greatest(k.expires_at, now() + make_interval(secs => r.ttl))
FROM unnest(%(tenant_id)b::text[], %(idempotency_key)b::text[], %(attempt)b::int[], %(call_id)b::text[],
    %(request)b::bytea[], %(request_hash)b::text[], %(ttl)b::int[])
    AS r(tenant_id, idempotency_key, attempt, call_id, request, request_hash, ttl)
WHERE k.tenant_id = r.tenant_id AND k.idempotency_key = r.idempotency_key
"""
REDRIVE_COLUMNS = ("tenant_id", "idempotency_key", "attempt", "call_id", "request", "request_hash", "ttl")
INSERT_SETTLED = """
INSERT INTO toolgate.idempotency_keys (tenant_id, idempotency_key, request_hash, status, tool_name, tool_version,
    executor, call_id, home_partition, attempt, request, response, error_code, lease_owner, lease_until,
    completed_at, expires_at)
SELECT k.tenant_id, k.idempotency_key, k.request_hash, k.status, k.tool_name, k.tool_version, k.executor, k.call_id,
    k.home_partition, 1, k.request, k.response::jsonb, k.error_code,
    CASE WHEN k.status = 'PENDING' THEN %(owner)s END,
    CASE WHEN k.status = 'PENDING' THEN now() + make_interval(secs => %(lease)s) END,
    CASE WHEN k.status = 'PENDING' THEN NULL ELSE now() END,
    now() + make_interval(secs => k.ttl)
FROM unnest(%(tenant_id)b::text[], %(idempotency_key)b::text[], %(request_hash)b::text[], %(tool_name)b::text[],
    %(tool_version)b::text[], %(executor)b::text[], %(call_id)b::text[], %(home_partition)b::int[],
    %(request)b::bytea[], %(ttl)b::int[], %(status)b::text[], %(response)b::text[], %(error_code)b::text[])
    AS k(tenant_id, idempotency_key, request_hash, tool_name, tool_version, executor, call_id, home_partition,
    request, ttl, status, response, error_code)
ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
RETURNING tenant_id, idempotency_key
"""
SETTLED_COLUMNS = (*RESERVE_COLUMNS, "status", "response", "error_code")
SETTLE = """
UPDATE toolgate.idempotency_keys k SET status = s.status, response = s.response::jsonb, error_code = s.error_code,
    completed_at = CASE WHEN s.status = 'PENDING' THEN NULL ELSE now() END,
    lease_until = CASE WHEN s.status = 'PENDING' THEN now() + make_interval(secs => %(lease)s) ELSE NULL END,
    lease_owner = CASE WHEN s.status = 'PENDING' THEN k.lease_owner ELSE NULL END
FROM unnest(%(tenant_id)b::text[], %(idempotency_key)b::text[], %(status)b::text[], %(response)b::text[],
    %(error_code)b::text[]) AS s(tenant_id, idempotency_key, status, response, error_code)
WHERE k.tenant_id = s.tenant_id AND k.idempotency_key = s.idempotency_key
"""
SETTLE_COLUMNS = ("tenant_id", "idempotency_key", "status", "response", "error_code")
TO_COMPENSATE = """
SELECT tenant_id, call_id, idempotency_key, status, tool_name, tool_version, compensated_by, request, response
FROM toolgate.idempotency_keys
WHERE (tenant_id, call_id) IN (SELECT * FROM unnest(%b::text[], %b::text[]))
ORDER BY tenant_id, idempotency_key
FOR UPDATE
"""
MARK_COMPENSATED = """
UPDATE toolgate.idempotency_keys SET status = 'COMPENSATED', compensated_by = %s, error_code = NULL
WHERE tenant_id = %s AND idempotency_key = %s
"""
MARK_COMPENSATION_FAILED = """
UPDATE toolgate.idempotency_keys SET error_code = 'COMPENSATION_FAILED'
WHERE tenant_id = %s AND idempotency_key = %s
"""
EXECUTED = """
SELECT tenant_id, call_id, idempotency_key, status, tool_name, tool_version, compensated_by, request, response
FROM toolgate.idempotency_keys WHERE call_id = %s AND (%s::text IS NULL OR tenant_id = %s)
"""


@dataclass(frozen=True, slots=True)
class Outcome:
    """A key's stored outcome, as a late call reads it."""

    tenant_id: str
    idempotency_key: str
    status: KeyStatus
    request_hash: str
    response: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class ToCompensate:
    """The key of an earlier call a compensation names, by that call's (tenant, call_id): as
    execution locks it (`to_compensate`) and as `toolgate compensate` reads it (`executed`)."""

    tenant_id: str
    call_id: str
    idempotency_key: str
    status: KeyStatus
    tool_name: str
    tool_version: str
    compensated_by: str | None
    request: bytes  # the earlier call's StageRecord, as received
    response: dict[str, Any] | None


def _arrays(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> dict[str, list[Any]]:
    return {column: [row[column] for row in rows] for column in columns}


def _pairs(idents: list[Ident]) -> tuple[list[str], list[str]]:
    return [i[0] for i in idents], [i[1] for i in idents]


def _status(value: str | None) -> KeyStatus | None:
    return KeyStatus(value) if value else None


def json_or_none(value: Any) -> str | None:
    """A stored response as the statements take it: JSON text (None stays NULL)."""
    return None if value is None else rows_json(value)


async def outcomes(conn: AsyncConnection[Any], idents: list[Ident]) -> list[Outcome]:
    """The keys' stored outcomes, as they are (no lock: a late call only reads them)."""
    cur = await keyed(conn, OUTCOMES, _pairs(idents))
    return [Outcome(r[0], r[1], KeyStatus(r[2]), r[3], r[4]) for r in await cur.fetchall()]


def reserve_params(rows: list[dict[str, Any]], owner: str, lease_s: float) -> dict[str, Any]:
    """RESERVE's parameters: one array per column (the request as bytea, as received), the
    lease's owner and length."""
    return {**_arrays(rows, RESERVE_COLUMNS), "owner": owner, "lease": lease_s}


async def reserve(conn: AsyncConnection[Any], rows: list[dict[str, Any]], owner: str, lease_s: float) -> set[Ident]:
    """Insert PENDING keys (each a dict of RESERVE_COLUMNS), leased to `owner`; those that
    were new."""
    cur = await conn.execute(RESERVE, reserve_params(rows, owner, lease_s))
    return {(r[0], r[1]) for r in await cur.fetchall()}


async def lock(conn: AsyncConnection[Any], idents: list[Ident]) -> dict[Ident, KeyRow]:
    """The keys' rows, by (tenant, key), locked until the transaction ends."""
    cur = await keyed(conn, LOCK, _pairs(idents))
    return {
        (r[0], r[1]): KeyRow(KeyStatus(r[2]), r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], _status(r[11]))
        for r in await cur.fetchall()
    }


async def redrive(conn: AsyncConnection[Any], rows: list[dict[str, Any]], owner: str, lease_s: float) -> None:
    """Existing keys run again (each a dict of REDRIVE_COLUMNS), PENDING and leased to `owner`."""
    if rows:
        params = {**_arrays(rows, REDRIVE_COLUMNS), "owner": owner, "lease": lease_s}
        await keyed(conn, REDRIVE, params)


async def settle(conn: AsyncConnection[Any], rows: list[dict[str, Any]], lease_s: float) -> None:
    """Each key's end (a dict of SETTLE_COLUMNS, its response as it is stored); a key still
    PENDING keeps its owner for another lease."""
    if rows:
        ends = [{**row, "response": json_or_none(row["response"])} for row in rows]
        await keyed(conn, SETTLE, {**_arrays(ends, SETTLE_COLUMNS), "lease": lease_s})


async def insert_settled(
    conn: AsyncConnection[Any], rows: list[dict[str, Any]], owner: str, lease_s: float
) -> AsyncCursor[Any] | None:
    """Insert new keys with their end (each a dict of SETTLED_COLUMNS, its response as JSON
    text); the cursor's rows are the keys inserted (`inserted`), and one missing was taken
    meanwhile. In a pipeline, its rows are read after the sync."""
    if not rows:
        return None
    return await conn.execute(INSERT_SETTLED, settled_params(rows, owner, lease_s))


def settled_params(rows: list[dict[str, Any]], owner: str, lease_s: float) -> dict[str, Any]:
    """INSERT_SETTLED's parameters: one array per column, and the lease a key still PENDING gets."""
    return {**_arrays(rows, SETTLED_COLUMNS), "owner": owner, "lease": lease_s}


async def inserted(cur: AsyncCursor[Any]) -> set[Ident]:
    """The keys `insert_settled`'s cursor inserted."""
    return {(r[0], r[1]) for r in await cur.fetchall()}


async def to_compensate(conn: AsyncConnection[Any], calls: list[tuple[str, str]]) -> list[ToCompensate]:
    """The keys of these earlier calls, by (tenant, call_id), locked for this transaction."""
    cur = await keyed(conn, TO_COMPENSATE, _pairs(calls))
    return [_to_compensate(r) for r in await cur.fetchall()]


async def mark_compensated(conn: AsyncConnection[Any], rows: list[tuple[str | None, str, str]]) -> None:
    """Earlier keys undone, each (the compensation's key, tenant, the earlier key)."""
    if rows:
        await conn.cursor().executemany(MARK_COMPENSATED, rows)


async def mark_compensation_failed(conn: AsyncConnection[Any], rows: list[tuple[str, str]]) -> None:
    """Earlier keys a compensation failed to undo, each (tenant, key): still COMPLETED."""
    if rows:
        await conn.cursor().executemany(MARK_COMPENSATION_FAILED, rows)


def executed(conn: psycopg.Connection[Any], call_id: str, tenant: str | None) -> list[ToCompensate]:
    """The key of call `call_id` (in `tenant`, or in any): one per tenant that has the call."""
    return [_to_compensate(r) for r in conn.execute(EXECUTED, (call_id, tenant, tenant)).fetchall()]


def _to_compensate(r: tuple[Any, ...]) -> ToCompensate:
    """A row of TO_COMPENSATE or EXECUTED (the same columns)."""
    return ToCompensate(r[0], r[1], r[2], KeyStatus(r[3]), r[4], r[5], r[6], bytes(r[7]), r[8])

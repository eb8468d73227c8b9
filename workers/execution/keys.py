"""Execution's reads and writes of idempotency keys (`toolgate.idempotency_keys`).

All inside the caller's transaction. Phase A reserves new keys as PENDING (leased to this
process), locks the existing ones and re-drives those the plan lets run again; a late call
reads stored outcomes; phase B settles each key with its status and stored response.

A round whose effects all run in Postgres reserves and records in one transaction, so no one
ever sees its new keys PENDING: it only locks the keys that exist (`lock`), and phase B inserts
each new key once, with its end (`insert_settled`), instead of inserting it PENDING and updating
it. That update was never a HOT one (it changes the status of partial indexes): it wrote a
second row version and three index entries per call, and left the first for autovacuum.
Measured with pg_stat_statements at 1,000 calls/s, the update was the stage's costliest
statement. Another transaction may insert the same key after the lock read found none: then
the insert finds it taken (`KeyTaken`), and the round runs again and finds it.

A round's statements that find its keys in the table (`lock`, `outcomes`, `settle`, `redrive`)
take the keys as arrays and are planned on every execution, never prepared. A worker connects
when the table is nearly empty (a new deployment): a plan Postgres kept from then, a hash join
over a sequential scan, went on scanning the whole table on every round as it grew (until
autovacuum analyzed it, which a fresh server does not do in its first minute); and a JSON
recordset, which the planner takes for 100 rows whatever it holds, made even a fresh plan scan a
table of a few thousand keys. At 300 calls/s into a fresh `toolgate up`, the lock was the stage's
costliest statement (pg_stat_statements), the run read millions of rows, and Postgres took more
CPU a call than with the statements planned each time
(docs/performance.md, "Figures behind the code"). Planned for the table and the keys at hand,
each key is one index probe, for a little planning.
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection, AsyncCursor

from toolgate.hashing import request_hash
from toolgate.schemas.models import ExecutionResult
from toolgate.states import KeyStatus
from toolgate.store.db import keyed, rows_json
from toolgate.workers.execution.answers import stored_response
from toolgate.workers.execution.attempt import Attempt
from toolgate.workers.execution.decision import StoredOutcome
from toolgate.workers.execution.idempotency import KeyRow

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


async def outcomes(conn: AsyncConnection[Any], idents: list[Ident]) -> dict[Ident, StoredOutcome]:
    """The keys' stored outcomes, as they are (no lock: a late call only reads them)."""
    cur = await keyed(conn, OUTCOMES, ([i[0] for i in idents], [i[1] for i in idents]))
    return {(r[0], r[1]): StoredOutcome(KeyStatus(r[2]), r[3], r[4]) for r in await cur.fetchall()}


def reserve_params(rows: list[dict[str, Any]], owner: str, lease_s: float) -> dict[str, Any]:
    """RESERVE's parameters: one array per column (the request as bytea, as received), the
    lease's owner and length."""
    return {**_arrays(rows, RESERVE_COLUMNS), "owner": owner, "lease": lease_s}


def _arrays(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> dict[str, list[Any]]:
    return {column: [row[column] for row in rows] for column in columns}


class KeyTaken(Exception):
    """A key its round found new was inserted by another transaction meanwhile: the round rolls
    back whole and runs again, and then finds the key (the handler)."""


def reservation(a: Attempt) -> dict[str, Any]:
    """What a new key records of the call that reserves it."""
    return {
        "tenant_id": a.record.tenant_id,
        "idempotency_key": a.key,
        "request_hash": request_hash(a.record),
        "tool_name": a.record.tool_name,
        "tool_version": a.record.tool_version,
        "executor": a.job.contract.executor["kind"],
        "call_id": a.record.call_id,
        "home_partition": a.record.home_partition,
        "request": a.call.raw,  # the bytes as received: no re-encoding
        "ttl": a.job.contract.idempotency_ttl_seconds,
    }


async def reserve(conn: AsyncConnection[Any], first: list[Attempt], owner: str, lease_s: float) -> set[Ident]:
    """Insert PENDING keys, leased to `owner`; returns those that were new."""
    cur = await conn.execute(RESERVE, reserve_params([reservation(a) for a in first], owner, lease_s))
    return {(r[0], r[1]) for r in await cur.fetchall()}


async def lock(conn: AsyncConnection[Any], idents: list[Ident]) -> dict[Ident, KeyRow]:
    """The keys' rows, locked until the transaction ends."""
    cur = await keyed(conn, LOCK, ([i[0] for i in idents], [i[1] for i in idents]))
    return {
        (r[0], r[1]): KeyRow(
            KeyStatus(r[2]), r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], KeyStatus(r[11]) if r[11] else None
        )
        for r in await cur.fetchall()
    }


def redrive_row(a: Attempt, attempt: int) -> dict[str, Any]:
    """An existing key this call runs again, as this attempt, leased to this process."""
    return {
        "tenant_id": a.record.tenant_id,
        "idempotency_key": a.key or "",
        "attempt": attempt,
        "call_id": a.record.call_id,
        "request": a.call.raw,  # the bytes as received: no re-encoding
        "request_hash": request_hash(a.record),
        "ttl": a.job.contract.idempotency_ttl_seconds,
    }


async def redrive(conn: AsyncConnection[Any], rows: list[dict[str, Any]], owner: str, lease_s: float) -> None:
    if rows:
        params = {**_arrays(rows, REDRIVE_COLUMNS), "owner": owner, "lease": lease_s}
        await keyed(conn, REDRIVE, params)


def settlement(tenant_id: str, key: str, res: ExecutionResult, status: KeyStatus) -> dict[str, Any]:
    """A key's end: its status, the response a repeat replays, and its error class."""
    return {
        "tenant_id": tenant_id,
        "idempotency_key": key,
        "status": status,
        "response": stored_response(res) if status != KeyStatus.PENDING else None,
        "error_code": None if status == KeyStatus.COMPLETED else str(res.outcome.taxonomy_class),
    }


async def settle(conn: AsyncConnection[Any], rows: list[dict[str, Any]], lease_s: float) -> None:
    if rows:
        ends = [{**row, "response": _json_or_none(row["response"])} for row in rows]
        await keyed(conn, SETTLE, {**_arrays(ends, SETTLE_COLUMNS), "lease": lease_s})


def settled_row(a: Attempt, res: ExecutionResult, status: KeyStatus) -> dict[str, Any]:
    """A new key as `insert_settled` writes it: its reservation and its end at once."""
    end = settlement(a.record.tenant_id, a.key or "", res, status)
    return {**reservation(a), **end, "response": _json_or_none(end["response"])}


def _json_or_none(value: Any) -> str | None:
    return None if value is None else rows_json(value)


async def insert_settled(
    conn: AsyncConnection[Any], rows: list[dict[str, Any]], owner: str, lease_s: float
) -> AsyncCursor[Any] | None:
    """Insert new keys with their end; the cursor's rows are the keys inserted, and one missing
    was taken meanwhile (`taken`). In a pipeline, its rows are read after the sync."""
    if not rows:
        return None
    return await conn.execute(INSERT_SETTLED, settled_params(rows, owner, lease_s))


def settled_params(rows: list[dict[str, Any]], owner: str, lease_s: float) -> dict[str, Any]:
    """INSERT_SETTLED's parameters: one array per column, and the lease a key still PENDING gets."""
    return {**_arrays(rows, SETTLED_COLUMNS), "owner": owner, "lease": lease_s}


async def taken(cur: AsyncCursor[Any] | None, rows: list[dict[str, Any]]) -> None:
    """Raise `KeyTaken` if any of `rows` was not inserted by `insert_settled`'s `cur`."""
    if cur is None:
        return
    inserted = {(r[0], r[1]) for r in await cur.fetchall()}
    missing = len({(row["tenant_id"], row["idempotency_key"]) for row in rows} - inserted)
    if missing:
        raise KeyTaken(f"{missing} new key(s) were inserted by another transaction meanwhile")

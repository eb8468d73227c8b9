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

The statements, and why they are planned on every execution, are store/keys.py's; this module
turns calls into the rows they write and the rows read into what the plan (idempotency.py) and the
late answer (decision.py) take.
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection, AsyncCursor

from toolgate.hashing import request_hash
from toolgate.schemas.models import ExecutionResult
from toolgate.states import KeyStatus
from toolgate.store import keys as idempotency_keys
from toolgate.store.keys import Ident, json_or_none
from toolgate.workers.execution.answers import stored_response
from toolgate.workers.execution.attempt import Attempt
from toolgate.workers.execution.decision import StoredOutcome
from toolgate.workers.execution.idempotency import KeyRow


async def outcomes(conn: AsyncConnection[Any], idents: list[Ident]) -> dict[Ident, StoredOutcome]:
    """The keys' stored outcomes, as they are (no lock: a late call only reads them)."""
    found = await idempotency_keys.outcomes(conn, idents)
    return {(o.tenant_id, o.idempotency_key): StoredOutcome(o.status, o.request_hash, o.response) for o in found}


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
    return await idempotency_keys.reserve(conn, [reservation(a) for a in first], owner, lease_s)


async def lock(conn: AsyncConnection[Any], idents: list[Ident]) -> dict[Ident, KeyRow]:
    """The keys' rows, locked until the transaction ends."""
    return await idempotency_keys.lock(conn, idents)


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


def settlement(tenant_id: str, key: str, res: ExecutionResult, status: KeyStatus) -> dict[str, Any]:
    """A key's end: its status, the response a repeat replays, and its error class."""
    return {
        "tenant_id": tenant_id,
        "idempotency_key": key,
        "status": status,
        "response": stored_response(res) if status != KeyStatus.PENDING else None,
        "error_code": None if status == KeyStatus.COMPLETED else str(res.outcome.taxonomy_class),
    }


def settled_row(a: Attempt, res: ExecutionResult, status: KeyStatus) -> dict[str, Any]:
    """A new key as `insert_settled` writes it: its reservation and its end at once."""
    end = settlement(a.record.tenant_id, a.key or "", res, status)
    return {**reservation(a), **end, "response": json_or_none(end["response"])}


async def taken(cur: AsyncCursor[Any] | None, rows: list[dict[str, Any]]) -> None:
    """Raise `KeyTaken` if any of `rows` was not inserted by `insert_settled`'s `cur`."""
    if cur is None:
        return
    inserted = await idempotency_keys.inserted(cur)
    missing = len({(row["tenant_id"], row["idempotency_key"]) for row in rows} - inserted)
    if missing:
        raise KeyTaken(f"{missing} new key(s) were inserted by another transaction meanwhile")

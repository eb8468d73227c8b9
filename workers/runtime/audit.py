"""The audit log: append-only and hash-chained.

Each row's hash is sha256(previous hash || canonical JSON of the row), so removing,
reordering or editing any row breaks every hash after it (`toolgate audit verify`). Writers
serialize on a transaction-scoped advisory lock, so the chain has one order.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from psycopg import AsyncConnection

from toolgate.schemas.wire import canonical_json
from toolgate.workers.runtime.db import make_pool

LOCK_ID = 0x61_75_64_74  # "audt"
GENESIS = "0" * 64
# A timestamp as the exact text that was hashed (UTC, microseconds).
AT_TEXT = "to_char({} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"


@dataclass(frozen=True)
class Entry:
    stage: str
    action: str
    actor: str
    call_id: str | None = None
    tenant_id: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


def chain_hash(prev_hash: str, at: str, entry: Entry) -> str:
    body = canonical_json(
        {
            "at": at,
            "stage": entry.stage,
            "action": entry.action,
            "actor": entry.actor,
            "call_id": entry.call_id,
            "tenant_id": entry.tenant_id,
            "detail": entry.detail,
        }
    )
    return hashlib.sha256((prev_hash + body).encode()).hexdigest()


async def append(conn: AsyncConnection[Any], entries: list[Entry]) -> None:
    """Append entries inside the caller's transaction."""
    if not entries:
        return
    await conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_ID,))
    cur = await conn.execute(
        f"SELECT {AT_TEXT.format('now()')}, (SELECT hash FROM toolgate.audit_log ORDER BY id DESC LIMIT 1)"
    )
    row = await cur.fetchone()
    assert row is not None
    at, prev = str(row[0]), str(row[1] or GENESIS)
    rows = []
    for entry in entries:
        digest = chain_hash(prev, at, entry)
        rows.append(
            {
                "at": at,
                "stage": entry.stage,
                "action": entry.action,
                "call_id": entry.call_id,
                "tenant_id": entry.tenant_id,
                "actor": entry.actor,
                "detail": entry.detail,
                "prev_hash": prev,
                "hash": digest,
            }
        )
        prev = digest
    await conn.execute(
        "INSERT INTO toolgate.audit_log (at, stage, action, call_id, tenant_id, actor, detail, prev_hash, hash) "
        "SELECT r.at::timestamptz, r.stage, r.action, r.call_id, r.tenant_id, r.actor, r.detail, r.prev_hash, r.hash "
        "FROM jsonb_to_recordset(%s::jsonb) AS r(at text, stage text, action text, call_id text, tenant_id text, "
        "actor text, detail jsonb, prev_hash text, hash text) ",
        (json.dumps(rows),),
    )


class AuditSink:
    """Where a stage audits what it refused outside a handler's own transaction (a forged record,
    bytes that prove nobody): a one-connection pool of its own, opened on first use."""

    def __init__(self, database_url: str, stage: str) -> None:
        self.pool = make_pool(database_url, f"{stage}-audit", max_size=1)
        self._opened = False

    async def write(self, entries: list[Entry]) -> None:
        if not self._opened:
            await self.pool.open()
            self._opened = True
        async with self.pool.connection() as conn, conn.transaction():
            await append(conn, entries)


VERIFY = (
    f"SELECT id, {AT_TEXT.format('at')}, stage, action, actor, call_id, tenant_id, detail, prev_hash, hash "
    "FROM toolgate.audit_log ORDER BY id"
)


def verify_rows(rows: list[tuple[Any, ...]]) -> tuple[int, int | None]:
    """(rows checked, id of the first broken row or None)."""
    prev = GENESIS
    for count, (row_id, at, stage, action, actor, call_id, tenant_id, detail, prev_hash, digest) in enumerate(rows):
        entry = Entry(stage, action, actor, call_id, tenant_id, detail)
        if prev_hash != prev or chain_hash(prev, at, entry) != digest:
            return count, int(row_id)
        prev = digest
    return len(rows), None

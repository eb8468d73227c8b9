"""toolgate.call_decisions (migration 0027): every validation and policy decision, with the
versions that made it and the inputs it was judged on (issue 51, part 3).

Written as one statement per round (`record`, a `jsonb_to_recordset` of the round's rows) that the
stage appends to the batch that already ends its round's transaction: the policy round's last
`batch.run` (workers/policy/handler.py), validation's refusal transaction
(workers/validation/handler.py). Read by `toolgate policy decided CALL_ID` (`of_call`) and by
`toolgate whatif` (`since`), pruned by retention (store/retention.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import fields
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row

from toolgate.store import audit, batch
from toolgate.store.db import rows_json
from toolgate.store.rows import Decided

__all__ = ["Decided", "of_call", "record", "record_with_audit", "since"]

COLUMNS = (
    "tenant_id, call_id, stage, decided_at_ms, tool_name, tool_version, contracts_digest, policy_digest, "
    "outcome, taxonomy_class, code, rule, approvals, approver_groups, call, facts, usage"
)
# `record` goes as hex in the round's JSON document (`bytes.hex`, the cheapest text of it), and
# Postgres decodes it.
RECORD = f"""
INSERT INTO toolgate.call_decisions ({COLUMNS}, record)
SELECT {COLUMNS}, decode(record, 'hex')
FROM jsonb_to_recordset(%s::jsonb) AS r(tenant_id text, call_id text, stage text, decided_at_ms bigint,
    tool_name text, tool_version text, contracts_digest text, policy_digest text, outcome text,
    taxonomy_class text, code text, rule text, approvals int, approver_groups text[], call jsonb,
    facts jsonb, usage jsonb, record text)
ON CONFLICT (tenant_id, call_id, stage) DO NOTHING
"""
OF_CALL = f"""
SELECT {COLUMNS}, record FROM toolgate.call_decisions WHERE call_id = %s AND (%s::text IS NULL OR tenant_id = %s)
ORDER BY tenant_id, decided_at_ms, stage DESC
"""
# The decisions since a time (and of a tenant), oldest first, for a replay.
SINCE = f"""
SELECT {COLUMNS}, record FROM toolgate.call_decisions
WHERE at >= to_timestamp((%s)::bigint / 1000.0) AND (%s::text IS NULL OR tenant_id = %s)
ORDER BY decided_at_ms, tenant_id, call_id, stage DESC
"""


NAMES = tuple(f.name for f in fields(Decided) if f.name != "record")


def record(rows: Sequence[Decided]) -> batch.Statement:
    """The statement writing a round's decisions: for the caller's batch, before its COMMIT. (Each
    row a shallow dict: `dataclasses.asdict` deep-copies every value, most of the cost per call.)"""
    return RECORD, (rows_json([_document(r) for r in rows]),)


def _document(row: Decided) -> dict[str, Any]:
    document = {name: getattr(row, name) for name in NAMES}
    document["record"] = row.record.hex() if row.record is not None else None
    return document


async def record_with_audit(conn: AsyncConnection[Any], entries: list[audit.Entry], rows: Sequence[Decided]) -> None:
    """Inside the caller's transaction: the audit entries (as `audit.append`) and the rows, which go in
    the round trip of the audit's own write (alone when there is no entry)."""
    if not entries:
        if rows:
            await conn.execute(*record(rows))
        return
    head = await (await audit.tail(conn)).fetchone()
    await batch.run(conn, [audit.rows_statement(head, entries), *([record(rows)] if rows else [])])


async def of_call(conn: AsyncConnection[Any], call_id: str, tenant_id: str | None = None) -> list[Decided]:
    """Every recorded decision on `call_id` (of `tenant_id`, or of any tenant), in the order made."""
    async with conn.cursor(row_factory=class_row(Decided)) as cur:
        await cur.execute(OF_CALL, (call_id, tenant_id, tenant_id))
        return await cur.fetchall()


async def since(
    conn: AsyncConnection[Any], since_ms: int, tenant_id: str | None = None, batch_rows: int = 1000
) -> AsyncIterator[list[Decided]]:
    """The decisions made at or after `since_ms` (of `tenant_id`, or of every tenant), oldest first,
    `batch_rows` at a time from a server-side cursor: a window of any length in bounded memory.
    Inside the caller's transaction (a named cursor lives in one)."""
    async with conn.cursor(name="call_decisions_since", row_factory=class_row(Decided)) as cur:
        await cur.execute(SINCE, (since_ms, tenant_id, tenant_id))
        while rows := await cur.fetchmany(batch_rows):
            yield rows

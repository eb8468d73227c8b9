"""Execution's reads and writes of approval tickets and target state (clearance.py decides).

All inside the caller's transaction: tickets are read under FOR UPDATE; a ticket is consumed
in the transaction of its effect (the reservation's, for an effect outside Postgres, which
cannot share one) and spent in the one that records its operation's end (`SPEND`); a target's
state is read under FOR UPDATE when the effect commits in the same transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import AsyncConnection

from toolgate.contracts.contract import Contract
from toolgate.schemas.models import StageRecord
from toolgate.states import TicketStatus
from toolgate.workers.execution.clearance import Ticket
from toolgate.workers.runtime import fact_loader, facts, target_state

LOCK = "SELECT approval_id FROM toolgate.approvals WHERE approval_id = ANY(%b) ORDER BY approval_id FOR UPDATE"
LOAD = """
SELECT a.approval_id, a.status, a.call_id, a.tenant_id, a.tool_name, a.tool_version, a.payload_hash,
       a.required_approvals, a.state_version, a.consumed_by,
       count(DISTINCT d.approver_id)
           FILTER (WHERE d.verdict = 'APPROVE' AND p.status = 'active' AND a.tenant_id = ANY(p.tenants)),
       a.spent_at IS NOT NULL
FROM toolgate.approvals a
LEFT JOIN toolgate.approval_decisions d USING (approval_id)
LEFT JOIN toolgate.approvers p ON p.approver_id = d.approver_id
WHERE a.approval_id = ANY(%b)
GROUP BY a.approval_id
"""
CONSUME = """
UPDATE toolgate.approvals a SET consumed_by = c.operation, consumed_at = coalesce(a.consumed_at, now())
FROM unnest(%b::text[], %b::text[]) AS c(approval_id, operation)
WHERE a.approval_id = c.approval_id AND a.status = 'APPROVED'
  AND (a.consumed_by IS NULL OR a.consumed_by = c.operation)
RETURNING a.approval_id
"""


async def load(conn: AsyncConnection[Any], approval_ids: Sequence[str]) -> dict[str, Ticket]:
    """The tickets, locked until the transaction ends."""
    ids = sorted(set(approval_ids))
    await conn.execute(LOCK, (ids,))
    cur = await conn.execute(LOAD, (ids,))
    return {row[0]: _ticket(row) for row in await cur.fetchall()}


def _ticket(row: tuple[Any, ...]) -> Ticket:
    approval_id, status, call_id, tenant_id, tool_name, tool_version, payload_hash, required, version, consumed = row[
        :10
    ]
    return Ticket(
        approval_id,
        TicketStatus(status),
        call_id,
        tenant_id,
        tool_name,
        tool_version,
        payload_hash,
        required,
        version,
        consumed,
        int(row[10]),
        bool(row[11]),
    )


async def consume(conn: AsyncConnection[Any], released: dict[str, str]) -> set[str]:
    """Mark tickets as having released their operation (approval_id -> operation key); returns
    those that did (a ticket another operation consumed meanwhile is not among them)."""
    if not released:
        return set()
    cur = await conn.execute(CONSUME, (list(released), list(released.values())))
    return {row[0] for row in await cur.fetchall()}


SPEND = "UPDATE toolgate.approvals SET spent_at = now() WHERE approval_id = ANY(%b) AND spent_at IS NULL"
# A key settled by reconciliation: the ticket of its call, if it released this key's operation.
SPEND_OPERATION = """
UPDATE toolgate.approvals SET spent_at = now()
WHERE approval_id = %s AND tenant_id = %s AND consumed_by = %s AND spent_at IS NULL
"""


async def state_now(
    conn: AsyncConnection[Any], calls: Sequence[tuple[StageRecord, Contract]], for_update: bool
) -> list[str | None]:
    """Each call's target state version as it is now (None: its contract binds no state)."""
    wanted = facts.needed(ref for record, contract in calls for ref in target_state.refs(record, contract))
    rows = await fact_loader.fetch(conn, wanted, for_update=for_update) if wanted else {}
    return [target_state.bound_version(record, contract, rows) for record, contract in calls]

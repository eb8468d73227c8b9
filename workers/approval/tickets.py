"""Approval-wait's reads and writes of tickets and approvers (decision.py judges them).

`lock` takes the tickets FOR UPDATE in approval_id order, so two decision rounds on the same
tickets never deadlock; `load` reads them with their decisions and the held call; `approvers`
reads the approvers that decided. `insert` writes new tickets (an existing one is left as it
is and not returned); `record_decisions` and `close` write what decisions did to them.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any

from psycopg import AsyncConnection

from toolgate.schemas.codec import codec
from toolgate.schemas.models import ApprovalDecision, StageRecord
from toolgate.states import TicketStatus
from toolgate.store import approvers as store_approvers
from toolgate.store.db import rows_json
from toolgate.workers.approval.decision import Approver, Ticket
from toolgate.workers.approval.packet import Opening

LOAD_TICKETS = """
SELECT a.approval_id, a.tool_name, a.tool_version, a.payload_hash, a.risk_class, a.required_approvals, a.status,
       (extract(epoch FROM a.expires_at) * 1000)::bigint, a.request, a.home_partition,
       coalesce(array_agg(d.approver_id) FILTER (WHERE d.verdict = 'APPROVE'), '{}'),
       coalesce(array_agg(d.approver_id) FILTER (WHERE d.approver_id IS NOT NULL), '{}'),
       coalesce(array_agg(d.decision_id) FILTER (WHERE d.decision_id IS NOT NULL), '{}'), a.approver_groups,
       a.state_version, a.tenant_id
FROM toolgate.approvals a LEFT JOIN toolgate.approval_decisions d USING (approval_id)
WHERE a.approval_id = ANY(%b)
GROUP BY a.approval_id
"""
LOCK_TICKETS = """
SELECT approval_id FROM toolgate.approvals WHERE approval_id = ANY(%b) ORDER BY approval_id FOR UPDATE
"""
INSERT_TICKETS = """
INSERT INTO toolgate.approvals (approval_id, call_id, tenant_id, run_id, tool_name, tool_version, payload_hash,
    risk_class, required_approvals, distinct_approvers, status, home_partition, request, packet, expires_at,
    approver_groups, escalate_at, state_version)
SELECT t.approval_id, t.call_id, t.tenant_id, t.run_id, t.tool_name, t.tool_version, t.payload_hash, t.risk_class,
    t.required_approvals, true, 'PENDING', t.home_partition, decode(t.request, 'base64'), t.packet,
    to_timestamp(t.expires_at_ms / 1000.0), t.approver_groups, to_timestamp(t.escalate_at_ms / 1000.0),
    t.state_version
FROM jsonb_to_recordset(%s::jsonb) AS t(approval_id text, call_id text, tenant_id text, run_id text, tool_name text,
    tool_version text, payload_hash text, risk_class text, required_approvals int, home_partition int,
    request text, packet jsonb, expires_at_ms bigint, approver_groups text[], escalate_at_ms bigint,
    state_version text)
ON CONFLICT (approval_id) DO NOTHING
RETURNING approval_id
"""
RECORD_DECISIONS = """
INSERT INTO toolgate.approval_decisions (decision_id, approval_id, approver_id, verdict, reason, decided_at)
SELECT d.decision_id, d.approval_id, d.approver_id, d.verdict, d.reason, to_timestamp(d.decided_at_ms / 1000.0)
FROM jsonb_to_recordset(%s::jsonb)
     AS d(decision_id text, approval_id text, approver_id text, verdict text, reason text, decided_at_ms bigint)
ON CONFLICT DO NOTHING
"""
CLOSE_TICKETS = (
    "UPDATE toolgate.approvals a SET status = c.status, decided_at = now() "
    "FROM unnest(%b::text[], %b::text[]) AS c(approval_id, status) "
    "WHERE a.approval_id = c.approval_id AND a.status = 'PENDING'"
)


async def lock(conn: AsyncConnection[Any], ids: list[str]) -> None:
    await conn.execute(LOCK_TICKETS, (ids,))


async def load(conn: AsyncConnection[Any], ids: list[str]) -> tuple[dict[str, Ticket], dict[str, StageRecord]]:
    """The tickets, and the call each one holds."""
    cur = await conn.execute(LOAD_TICKETS, (ids,))
    tickets: dict[str, Ticket] = {}
    requests: dict[str, StageRecord] = {}
    for row in await cur.fetchall():
        approval_id = row[0]
        tickets[approval_id] = Ticket(
            approval_id=approval_id,
            tenant_id=row[15],
            tool_name=row[1],
            tool_version=row[2],
            payload_hash=row[3],
            risk_class=row[4],
            required_approvals=row[5],
            status=TicketStatus(row[6]),
            expires_at_ms=int(row[7]),
            approved_by=tuple(row[10]),
            decided_by=tuple(row[11]),
            used_decisions=frozenset(row[12]),
            groups=tuple(row[13]),
            state_version=row[14],
        )
        requests[approval_id] = codec().decode(bytes(row[8]), StageRecord)
    return tickets, requests


async def approvers(conn: AsyncConnection[Any], ids: list[str]) -> dict[str, Approver]:
    return {
        r.approver_id: Approver(
            r.approver_id, bytes(r.public_key), tuple(r.risk_classes), bool(r.active), tuple(r.groups), tuple(r.tenants)
        )
        for r in await store_approvers.deciding(conn, ids)
    }


def ticket_row(opened: Opening) -> dict[str, Any]:
    """A new ticket as a row of INSERT_TICKETS."""
    request, packet = opened.request, opened.packet
    return {
        "approval_id": packet.approval_id,
        "call_id": request.call_id,
        "tenant_id": request.tenant_id,
        "run_id": request.run_id,
        "tool_name": request.tool_name,
        "tool_version": request.tool_version,
        "payload_hash": request.payload_hash,
        "risk_class": packet.risk_class,
        "required_approvals": request.required_approvals,
        "home_partition": request.home_partition,
        "request": base64.b64encode(codec().encode(request)).decode(),
        "packet": packet.model_dump(mode="json"),
        "expires_at_ms": packet.expires_at_ms,
        "approver_groups": packet.approver_groups,
        "escalate_at_ms": opened.escalate_at_ms,
        "state_version": packet.state_version,
    }


async def insert(conn: AsyncConnection[Any], opened: Iterable[Opening]) -> set[str]:
    """Write the tickets that do not exist yet; the approval_ids of those written."""
    cur = await conn.execute(INSERT_TICKETS, (rows_json([ticket_row(o) for o in opened]),))
    return {r[0] for r in await cur.fetchall()}


def decision_row(decision: ApprovalDecision) -> dict[str, Any]:
    """A counted decision as a row of RECORD_DECISIONS."""
    return {
        "decision_id": decision.decision_id,
        "approval_id": decision.approval_id,
        "approver_id": decision.approver_id,
        "verdict": str(decision.decision),
        "reason": decision.reason,
        "decided_at_ms": decision.decided_at_ms,
    }


async def record_decisions(conn: AsyncConnection[Any], counted: list[ApprovalDecision]) -> None:
    await conn.execute(RECORD_DECISIONS, (rows_json([decision_row(d) for d in counted]),))


async def close(conn: AsyncConnection[Any], decided: list[Ticket]) -> None:
    """Set the status the decisions gave these tickets, on those still PENDING in Postgres."""
    if decided:
        await conn.execute(CLOSE_TICKETS, ([t.approval_id for t in decided], [str(t.status) for t in decided]))

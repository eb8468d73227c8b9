"""toolgate.approvals and toolgate.approval_decisions: held calls' approval tickets and the
decisions counted on them. Approval-wait opens, decides and closes tickets and says a held one
again (workers/approval/tickets.py, resume.py; open tickets in the background are store/open_approvals.py's);
execution clears a call by its ticket, consumes it with the effect and spends it when the operation
ends (workers/execution/tickets.py, recording.py; reconciliation, for a key it settles). The MCP
door reads a call's ticket (door/session.py); operators list and show them (ops/approvals.py)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection, Connection

from toolgate.states import TicketStatus
from toolgate.store.db import rows_json
from toolgate.store.rows import OpenTicket
from toolgate.store.rows import Ticket as ClearedTicket

TICKETS = """
SELECT a.approval_id, a.tool_name, a.tool_version, a.payload_hash, a.risk_class, a.required_approvals, a.status,
       (extract(epoch FROM a.expires_at) * 1000)::bigint, a.request, a.home_partition,
       coalesce(array_agg(d.approver_id) FILTER (WHERE d.verdict = 'APPROVE'), '{}'),
       coalesce(array_agg(d.approver_id) FILTER (WHERE d.approver_id IS NOT NULL), '{}'),
       coalesce(array_agg(d.decision_id) FILTER (WHERE d.decision_id IS NOT NULL), '{}'), a.approver_groups,
       a.state_version, a.tenant_id, a.packet->>'trace_id'
FROM toolgate.approvals a LEFT JOIN toolgate.approval_decisions d USING (approval_id)
WHERE a.approval_id = ANY(%b)
GROUP BY a.approval_id
"""
LOCK = """
SELECT approval_id FROM toolgate.approvals WHERE approval_id = ANY(%b) ORDER BY approval_id FOR UPDATE
"""
INSERT = """
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
INSERT INTO toolgate.approval_decisions (decision_id, approval_id, approver_id, verdict, reason, decided_at, signed,
    signature, public_key)
SELECT d.decision_id, d.approval_id, d.approver_id, d.verdict, d.reason, to_timestamp(d.decided_at_ms / 1000.0),
    decode(d.signed, 'base64'), decode(d.signature, 'base64'), decode(d.public_key, 'base64')
FROM jsonb_to_recordset(%s::jsonb)
     AS d(decision_id text, approval_id text, approver_id text, verdict text, reason text, decided_at_ms bigint,
          signed text, signature text, public_key text)
ON CONFLICT DO NOTHING
"""
CLOSE = (
    "UPDATE toolgate.approvals a SET status = c.status, decided_at = now() "
    "FROM unnest(%b::text[], %b::text[]) AS c(approval_id, status) "
    "WHERE a.approval_id = c.approval_id AND a.status = 'PENDING'"
)
HELD = """
SELECT a.approval_id, a.status, a.request, a.packet,
       coalesce(array_agg(d.approver_id ORDER BY d.decided_at) FILTER (WHERE d.verdict = 'APPROVE'), '{}'),
       (array_agg(d.approver_id ORDER BY d.decided_at) FILTER (WHERE d.verdict = 'DENY'))[1],
       (array_agg(d.reason ORDER BY d.decided_at) FILTER (WHERE d.verdict = 'DENY'))[1]
FROM toolgate.approvals a LEFT JOIN toolgate.approval_decisions d USING (approval_id)
WHERE a.approval_id = ANY(%b)
GROUP BY a.approval_id
"""


@dataclass(frozen=True, slots=True)
class Held:
    """A ticket with what is needed to say it again: its held call, its packet, who approved it
    (in order) and the first denial."""

    approval_id: str
    status: str
    request: bytes
    packet: dict[str, Any]
    approved_by: list[str]
    denied_by: str | None
    denial_reason: str | None


async def lock(conn: AsyncConnection[Any], ids: Sequence[str]) -> None:
    """Lock these tickets until the transaction ends, in approval_id order (`ids` sorted)."""
    await conn.execute(LOCK, (ids,))


async def tickets(conn: AsyncConnection[Any], ids: Sequence[str]) -> list[tuple[OpenTicket, bytes]]:
    """The tickets, each with the call it holds as encoded (TICKETS' columns, in order)."""
    cur = await conn.execute(TICKETS, (ids,))
    return [
        (
            OpenTicket(
                r[0],
                r[15],
                r[1],
                r[2],
                r[3],
                r[4],
                r[5],
                TicketStatus(r[6]),
                int(r[7]),
                tuple(r[10]),
                tuple(r[11]),
                frozenset(r[12]),
                tuple(r[13]),
                r[14],
                r[16] or "",
            ),
            bytes(r[8]),
        )
        for r in await cur.fetchall()
    ]


async def held(conn: AsyncConnection[Any], ids: Sequence[str]) -> list[Held]:
    cur = await conn.execute(HELD, (ids,))
    return [Held(*row) for row in await cur.fetchall()]


async def insert(conn: AsyncConnection[Any], rows: Sequence[dict[str, Any]]) -> set[str]:
    """Write the tickets (rows of INSERT's recordset) that do not exist yet; the approval_ids of
    those written."""
    cur = await conn.execute(INSERT, (rows_json(rows),))
    return {r[0] for r in await cur.fetchall()}


async def record_decisions(conn: AsyncConnection[Any], rows: Sequence[dict[str, Any]]) -> None:
    """Add these decisions (rows of RECORD_DECISIONS's recordset; one recorded already is kept)."""
    await conn.execute(RECORD_DECISIONS, (rows_json(rows),))


async def close(conn: AsyncConnection[Any], ids: list[str], statuses: list[str]) -> None:
    """Set each ticket's status, on those still PENDING."""
    await conn.execute(CLOSE, (ids, statuses))


# Execution's, to clear a call by its ticket, consume it with the effect, spend it at the end.
CLEARANCE = """
SELECT a.approval_id, a.status, a.call_id, a.tenant_id, a.tool_name, a.tool_version, a.payload_hash,
       a.required_approvals, a.state_version, a.consumed_by,
       count(DISTINCT d.approver_id) FILTER (
           WHERE d.verdict = 'APPROVE' AND p.status = 'active' AND a.tenant_id = ANY(p.tenants)
             AND a.risk_class = ANY(p.risk_classes)
             AND (cardinality(a.approver_groups) = 0 OR p.groups && a.approver_groups)
             AND NOT coalesce(a.packet->'requested_by'->>'user_id', '') = ANY(p.acts_as)),
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
SPEND = "UPDATE toolgate.approvals SET spent_at = now() WHERE approval_id = ANY(%b) AND spent_at IS NULL"
# A key settled by reconciliation: the ticket of its call, if it released this key's operation.
SPEND_OPERATION = """
UPDATE toolgate.approvals SET spent_at = now()
WHERE approval_id = %s AND tenant_id = %s AND consumed_by = %s AND spent_at IS NULL
"""


async def clearances(conn: AsyncConnection[Any], ids: Sequence[str]) -> list[ClearedTicket]:
    """The tickets as execution clears a call by them: with how many distinct approvers approved
    each who are, now, what approval-wait counted them as (active, registered for its tenant and
    its risk class, in a group it reached, not acting as the user its packet names as the
    call's requester), and whether its operation ended."""
    cur = await conn.execute(CLEARANCE, (ids,))
    return [
        ClearedTicket(a, TicketStatus(status), c, t, n, v, h, r, s, by, int(approvers), bool(spent))
        for a, status, c, t, n, v, h, r, s, by, approvers, spent in await cur.fetchall()
    ]


async def consume(conn: AsyncConnection[Any], approval_ids: list[str], operations: list[str]) -> set[str]:
    """Mark each ticket as having released its operation; those that did (one another operation
    consumed is not among them)."""
    cur = await conn.execute(CONSUME, (approval_ids, operations))
    return {row[0] for row in await cur.fetchall()}


async def spend(conn: AsyncConnection[Any], approval_ids: list[str]) -> None:
    """The operations these tickets released ended."""
    await conn.execute(SPEND, (approval_ids,))


async def spend_operation(conn: AsyncConnection[Any], approval_id: str, tenant_id: str, operation: str) -> None:
    """The ticket's operation ended, if it released this one."""
    await conn.execute(SPEND_OPERATION, (approval_id, tenant_id, operation))


# The door's and the operators'.
PROGRESS = """
SELECT a.approval_id, a.status, a.required_approvals, count(d.*) FILTER (WHERE d.verdict = 'APPROVE'),
       a.approver_groups, (extract(epoch FROM a.expires_at) * 1000)::bigint
FROM toolgate.approvals a LEFT JOIN toolgate.approval_decisions d USING (approval_id)
WHERE a.tenant_id = %s AND a.call_id = %s GROUP BY a.approval_id ORDER BY a.created_at DESC LIMIT 1
"""
LIST = """
SELECT a.approval_id, a.status, a.tool_name, a.tool_version, a.risk_class, a.tenant_id, a.required_approvals,
       count(d.*) FILTER (WHERE d.verdict = 'APPROVE'), a.created_at, a.expires_at, a.call_id
FROM toolgate.approvals a LEFT JOIN toolgate.approval_decisions d USING (approval_id)
WHERE (%(status)s::text IS NULL OR a.status = %(status)s)
  AND (%(approver)s::text IS NULL OR a.tenant_id = ANY(coalesce(
      (SELECT p.tenants FROM toolgate.approvers p WHERE p.approver_id = %(approver)s AND p.status = 'active'), '{}')))
GROUP BY a.approval_id ORDER BY a.created_at DESC LIMIT %(limit)s
"""
CARD = "SELECT packet, status, decided_at FROM toolgate.approvals WHERE approval_id = %s"
DECISIONS = (
    "SELECT approver_id, verdict, reason, decided_at FROM toolgate.approval_decisions WHERE approval_id = %s "
    "ORDER BY recorded_at"
)


@dataclass(frozen=True, slots=True)
class Progress:
    """The latest ticket of a call, as the door says it while the call waits."""

    approval_id: str
    status: str
    required_approvals: int
    approved: int
    approver_groups: list[str]
    expires_at_ms: int


@dataclass(frozen=True, slots=True)
class Listed:
    """A ticket as operators list it, with how many approvals it has."""

    approval_id: str
    status: str
    tool_name: str
    tool_version: str
    risk_class: str
    tenant_id: str
    required_approvals: int
    approved: int
    created_at: dt.datetime
    expires_at: dt.datetime
    call_id: str


@dataclass(frozen=True, slots=True)
class Card:
    """A ticket's packet and where it stands, for its confirmation card."""

    packet: dict[str, Any]
    status: str
    decided_at: dt.datetime | None


@dataclass(frozen=True, slots=True)
class Decided:
    """A decision recorded on a ticket."""

    approver_id: str
    verdict: str
    reason: str | None
    decided_at: dt.datetime


async def progress(conn: AsyncConnection[Any], tenant_id: str, call_id: str) -> Progress | None:
    """The call's latest ticket; None: the call has none."""
    row = await (await conn.execute(PROGRESS, (tenant_id, call_id))).fetchone()
    return None if row is None else Progress(*row)


def listed(conn: Connection[Any], status: str | None, limit: int, approver: str | None) -> list[Listed]:
    """The newest tickets (of `status`; of the tenants `approver` decides for, when given)."""
    rows = conn.execute(LIST, {"status": status, "limit": limit, "approver": approver}).fetchall()
    return [Listed(*row) for row in rows]


def card(conn: Connection[Any], approval_id: str) -> Card | None:
    row = conn.execute(CARD, (approval_id,)).fetchone()
    return None if row is None else Card(*row)


def decisions(conn: Connection[Any], approval_id: str) -> list[Decided]:
    """The decisions recorded on a ticket, in the order they were."""
    return [Decided(*row) for row in conn.execute(DECISIONS, (approval_id,)).fetchall()]

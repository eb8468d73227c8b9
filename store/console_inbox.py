"""What the console shows an approver (console/app.py): the open tickets of the tenants, risk
classes and groups it serves, with their votes; one ticket's packet, status and decisions for
its card, and the decisions approval-wait did not count on it. Read-only: decisions reach tickets
only through approval-wait."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

# The PENDING tickets an approver may decide, as approval-wait judges them (workers/approval/
# decision.py): of a tenant it serves, of a risk class it may approve, and reaching one of its
# groups (or no group at all).
INBOX = """
SELECT a.approval_id, a.tenant_id, a.tool_name, a.tool_version, a.risk_class, a.required_approvals,
       count(d.*) FILTER (WHERE d.verdict = 'APPROVE'), a.expires_at, a.packet->>'action',
       coalesce(bool_or(d.approver_id = %(approver)s), false)
FROM toolgate.approvals a
JOIN toolgate.approvers p ON p.approver_id = %(approver)s AND p.status = 'active'
LEFT JOIN toolgate.approval_decisions d ON d.approval_id = a.approval_id
WHERE a.status = 'PENDING' AND a.expires_at > now() AND a.tenant_id = ANY(p.tenants)
  AND a.risk_class = ANY(p.risk_classes)
  AND (cardinality(a.approver_groups) = 0 OR a.approver_groups && p.groups)
  AND (%(approval)s::text IS NULL OR a.approval_id = %(approval)s)
GROUP BY a.approval_id ORDER BY a.expires_at LIMIT 200
"""
CARD = """
SELECT a.packet, a.status, a.decided_at, a.created_at, a.expires_at, a.tenant_id = ANY(p.tenants)
FROM toolgate.approvals a LEFT JOIN toolgate.approvers p ON p.approver_id = %s AND p.status = 'active'
WHERE a.approval_id = %s
"""
# Which of these approvers may see which of these tickets on their cards: active, and serving the
# ticket's tenant (CARD's `served`), for the live notices of a batch of changed tickets at once.
SEEN_BY = """
SELECT a.approval_id, p.approver_id
FROM toolgate.approvals a JOIN toolgate.approvers p ON a.tenant_id = ANY(p.tenants) AND p.status = 'active'
WHERE a.approval_id = ANY(%b) AND p.approver_id = ANY(%b)
"""
DECISIONS = (
    "SELECT approver_id, verdict, reason, decided_at FROM toolgate.approval_decisions WHERE approval_id = %s "
    "ORDER BY recorded_at"
)

# The decisions approval-wait refused or took as a repeat on a ticket, newest 50, as it audited them
# (workers/approval/decision.py `transition`; decisions.py `unproven_entry`, whose signer is only
# claimed): by migration 0039's index, whatever the audit log's size.
UNCOUNTED = """
SELECT at, actor, action = 'decision_noop', detail->>'verdict', detail->>'code', detail->>'reason',
       coalesce((detail->>'proven')::boolean, true)
FROM toolgate.audit_log
WHERE action IN ('decision_refused', 'decision_noop') AND detail->>'approval_id' = %s
ORDER BY id DESC LIMIT 50
"""


@dataclass(frozen=True, slots=True)
class Waiting:
    """An open ticket in an approver's inbox."""

    approval_id: str
    tenant_id: str
    tool_name: str
    tool_version: str
    risk_class: str
    required_approvals: int
    approved: int
    expires_at: dt.datetime
    action: str | None
    voted: bool  # the approver's own decision is counted on it


@dataclass(frozen=True, slots=True)
class Card:
    """A ticket's packet and where it stands; `served`: whether the approver serves its tenant."""

    packet: dict[str, Any]
    status: str
    decided_at: dt.datetime | None
    created_at: dt.datetime
    expires_at: dt.datetime
    served: bool


@dataclass(frozen=True, slots=True)
class Vote:
    approver_id: str
    verdict: str
    reason: str | None
    decided_at: dt.datetime


@dataclass(frozen=True, slots=True)
class Uncounted:
    """A decision on a ticket that did not count: refused, or a repeat of one counted (`repeat`).
    `signer` is who signed it, or who it claims signed it when it proved nobody (not `proven`)."""

    at: dt.datetime
    signer: str
    repeat: bool
    verdict: str | None
    code: str | None
    reason: str | None
    proven: bool


async def inbox(conn: AsyncConnection[Any], approver_id: str, approval_id: str | None = None) -> list[Waiting]:
    """The open tickets the approver may decide, soonest expiry first (only `approval_id`, when given)."""
    cur = await conn.execute(INBOX, {"approver": approver_id, "approval": approval_id})
    return [Waiting(*row) for row in await cur.fetchall()]


async def card(conn: AsyncConnection[Any], approver_id: str, approval_id: str) -> Card | None:
    row = await (await conn.execute(CARD, (approver_id, approval_id))).fetchone()
    return None if row is None else Card(row[0], row[1], row[2], row[3], row[4], bool(row[5]))


async def seen_by(conn: AsyncConnection[Any], approval_ids: list[str], approver_ids: list[str]) -> set[tuple[str, str]]:
    """The (ticket, approver) pairs among these in which the approver may see the ticket."""
    rows = await (await conn.execute(SEEN_BY, (approval_ids, approver_ids))).fetchall()
    return {(row[0], row[1]) for row in rows}


async def votes(conn: AsyncConnection[Any], approval_id: str) -> list[Vote]:
    return [Vote(*row) for row in await (await conn.execute(DECISIONS, (approval_id,))).fetchall()]


async def uncounted(conn: AsyncConnection[Any], approval_id: str) -> list[Uncounted]:
    """The decisions on the ticket that did not count, oldest first (the newest 50)."""
    rows = await (await conn.execute(UNCOUNTED, (approval_id,))).fetchall()
    return [Uncounted(*row) for row in reversed(rows)]


CHANNEL = "toolgate_console"  # migration 0031's triggers: a changed ticket's approval id
LISTEN = "LISTEN toolgate_console"


async def listen(conn: AsyncConnection[Any]) -> None:
    """Take the notices of changed tickets on `conn` (autocommit)."""
    await conn.execute(LISTEN)

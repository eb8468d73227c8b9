"""The approval sweep: tickets that reached their escalation time go to the next approver
group (the packet announced again, one group more), and tickets past their expiry are
AUTO_DENIED, never approved. Run when one falls due by approval-wait's ExpirySweeper, and
by reconciliation for expiry (it imports this module, not the handlers).
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from toolgate.contracts.registry import Registry
from toolgate.schemas.codec import codec
from toolgate.schemas.models import ApprovalRequest, StageRecord
from toolgate.settings import Settings
from toolgate.states import TicketStatus
from toolgate.store.db import make_pool, rows_json
from toolgate.topics.catalog import Topics
from toolgate.workers.approval import resume
from toolgate.workers.approval.decision import STAGE
from toolgate.workers.approval.packet import escalated, next_escalation_ms
from toolgate.workers.runtime import audit, outbox
from toolgate.workers.runtime.alarm import Alarm
from toolgate.workers.runtime.clock import now_ms

EXPIRE = """
UPDATE toolgate.approvals SET status = 'AUTO_DENIED', decided_at = now()
WHERE approval_id IN (
    SELECT approval_id FROM toolgate.approvals WHERE status = 'PENDING' AND expires_at < now()
    ORDER BY expires_at LIMIT 500 FOR UPDATE SKIP LOCKED)
RETURNING approval_id, call_id, tenant_id, request
"""


async def expire_approvals(conn: AsyncConnection[Any], topics: Topics, stage: str) -> int:
    """AUTO_DENY tickets past their expiry, inside the caller's transaction: the agent hears
    it as an expiry (approval_expired), never as a denial, and never gets an approval."""
    now = now_ms()
    cur = await conn.execute(EXPIRE)
    expired = await cur.fetchall()
    rows, entries = [], []
    for approval_id, call_id, tenant_id, request in expired:
        record = codec().decode(bytes(request), StageRecord)
        closed = resume.closed(record, "approval_expired", resume.expiry(approval_id), now)
        rows.append(outbox.item("results", record.home_partition, closed))
        entries.append(
            audit.Entry(
                stage,
                "approval_auto_denied",
                "toolgate",
                call_id,
                tenant_id,
                {"approval_id": approval_id, "status": str(TicketStatus.AUTO_DENIED)},
            )
        )
    await outbox.enqueue(conn, rows, topics)
    await audit.append(conn, entries)
    return len(expired)


ESCALATE = """
SELECT approval_id, call_id, tenant_id, tool_name, tool_version, escalation_level, packet, request,
       (extract(epoch FROM created_at) * 1000)::bigint, (extract(epoch FROM expires_at) * 1000)::bigint
FROM toolgate.approvals
WHERE status = 'PENDING' AND escalate_at <= now() AND expires_at > now()
ORDER BY escalate_at LIMIT 500 FOR UPDATE SKIP LOCKED
"""
RECORD_ESCALATIONS = """
UPDATE toolgate.approvals a SET escalation_level = e.level, approver_groups = e.groups, packet = e.packet,
    escalated_at = now(), escalate_at = to_timestamp(e.next_ms / 1000.0)
FROM jsonb_to_recordset(%s::jsonb) AS e(approval_id text, level int, groups text[], packet jsonb, next_ms bigint)
WHERE a.approval_id = e.approval_id
"""


async def escalate_approvals(conn: AsyncConnection[Any], registry: Registry, topics: Topics, stage: str) -> int:
    """Open tickets that reached their escalation time to the next approver group: the packet
    is published again (same approval_id, one more group) and the escalation is audited."""
    cur = await conn.execute(ESCALATE)
    due = await cur.fetchall()
    rows, entries, updates = [], [], []
    for approval_id, call_id, tenant_id, tool, version, level, packet_json, request, created_ms, expires_ms in due:
        contract = registry.get(tool, version)
        current = ApprovalRequest.model_validate(packet_json).model_copy(update={"escalation_level": level})
        packet = escalated(current, contract)
        traceparent = codec().decode(bytes(request), StageRecord).traceparent
        updates.append(
            {
                "approval_id": approval_id,
                "level": packet.escalation_level,
                "groups": packet.approver_groups,
                "packet": packet.model_dump(mode="json"),
                "next_ms": next_escalation_ms(contract, created_ms, expires_ms, packet.escalation_level),
            }
        )
        rows.append(
            outbox.record(
                "approvals_requested",
                packet,
                key=approval_id,
                traceparent=traceparent,
                call_id=call_id,
                tenant_id=tenant_id,
                tenant_topic=True,
            )
        )
        entries.append(
            audit.Entry(
                stage,
                "approval_escalated",
                "toolgate",
                call_id,
                tenant_id,
                {"approval_id": approval_id, "level": packet.escalation_level, "groups": packet.approver_groups},
            )
        )
    if updates:
        await conn.execute(RECORD_ESCALATIONS, (rows_json(updates),))
    await outbox.enqueue(conn, rows, topics)
    await audit.append(conn, entries)
    return len(due)


# How long until the next ticket falls due (its escalation or its expiry), in seconds (at most 0:
# now; NULL: no ticket waits): the first entry of each of two partial indexes (approvals_pending_
# idx, approvals_escalation_idx), not a transaction of two locking statements, on which an idle
# approval-wait spent CPU every second for nothing (docs/performance.md, "Figures behind the code").
NEXT_DUE = """
SELECT extract(epoch FROM least(
    (SELECT min(expires_at) FROM toolgate.approvals WHERE status = 'PENDING'),
    (SELECT min(escalate_at) FROM toolgate.approvals WHERE status = 'PENDING')) - now())::float8
"""
# How long a sweep with nothing due sooner sleeps: a ticket this process opens rings it
# (AuthorizedHandler), one that another approval-wait worker opened is seen this late at most
# (and reconciliation expires tickets too). Asking every sweep interval (1 s) whether any ticket
# was due cost an idle approval-wait CPU for nothing (docs/performance.md, "Figures behind the code").
IDLE_SWEEP_S = 5.0


def next_sweep_s(until_due_s: float | None, interval_s: float) -> float:
    """Seconds until the next sweep: the sweep interval while a ticket falls due within it,
    else until the first falls due, at most IDLE_SWEEP_S."""
    if until_due_s is None:
        return max(interval_s, IDLE_SWEEP_S)
    return max(interval_s, min(until_due_s, IDLE_SWEEP_S))


class ExpirySweeper:
    """Escalates due tickets and AUTO_DENIES expired ones when any falls due: it sleeps until
    then (`alarm`, rung when a ticket is opened), at least the sweep interval."""

    def __init__(self, registry: Registry, settings: Settings) -> None:
        self.registry = registry
        # Autocommit: the look for due tickets is one statement; a sweep is its own transaction.
        self.pool = make_pool(settings.database_url, f"{STAGE}-expiry", max_size=1, autocommit=True)
        self.topics = Topics(settings.topic_prefix)
        self.interval_s = settings.approval_sweep_seconds
        self.alarm = Alarm()
        self._opened = False

    async def sweep(self) -> None:
        if not self._opened:
            await self.pool.open()
            self._opened = True
        async with self.pool.connection() as conn:
            row = await (await conn.execute(NEXT_DUE)).fetchone()
        until_due = None if row is None or row[0] is None else float(row[0])
        self.alarm.after(next_sweep_s(until_due, self.interval_s))
        if until_due is None or until_due > 0:
            return
        async with self.pool.connection() as conn, conn.transaction():
            await escalate_approvals(conn, self.registry, self.topics, STAGE)
            await expire_approvals(conn, self.topics, STAGE)

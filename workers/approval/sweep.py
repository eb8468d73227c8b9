"""The approval sweep: tickets that reached their escalation time go to the next approver
group (the packet announced again, one group more: of the groups the policy named for the
call, else of its contract's), and tickets past their expiry are AUTO_DENIED, never approved.
Run when one falls due by approval-wait's ExpirySweeper, and by reconciliation for expiry (it
imports this module, not the handlers).
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from toolgate.contracts.registry import Registry
from toolgate.schemas.codec import codec
from toolgate.schemas.hashing import usage_events
from toolgate.schemas.models import ApprovalRequest, StageRecord
from toolgate.settings import Settings
from toolgate.states import TicketStatus
from toolgate.store import audit, open_approvals, values
from toolgate.store import outbox as outbox_rows
from toolgate.store.db import make_pool
from toolgate.topics.catalog import Topics
from toolgate.topics.headers import Address
from toolgate.workers.approval import resume
from toolgate.workers.approval.decision import STAGE
from toolgate.workers.approval.packet import approver_groups, escalated, next_escalation_ms
from toolgate.workers.runtime import outbox
from toolgate.workers.runtime.alarm import Alarm
from toolgate.workers.runtime.clock import now_ms


async def expire_approvals(conn: AsyncConnection[Any], topics: Topics, stage: str) -> int:
    """AUTO_DENY tickets past their expiry, inside the caller's transaction: the agent hears
    it as an expiry (approval_expired), never as a denial, and never gets an approval."""
    now = now_ms()
    expired = await open_approvals.expire(conn)
    rows, entries = [], []
    released: list[str] = []
    for ticket in expired:
        record = codec().decode(bytes(ticket.request), StageRecord)
        released += usage_events(record.call)
        closed = resume.closed(record, "approval_expired", resume.expiry(ticket.approval_id), now)
        rows.append(outbox.item("results", record.call.home_partition, closed))
        entries.append(
            audit.Entry(
                stage,
                "approval_auto_denied",
                "toolgate",
                ticket.call_id,
                ticket.tenant_id,
                {"approval_id": ticket.approval_id, "status": str(TicketStatus.AUTO_DENIED)},
            )
        )
    # What the expired calls reserved of their value budgets is theirs no more (store/values.py).
    await values.release(conn, released, ended=False)
    await outbox_rows.enqueue(conn, rows, topics)
    await audit.append(conn, entries)
    return len(expired)


async def escalate_approvals(conn: AsyncConnection[Any], registry: Registry, topics: Topics, stage: str) -> int:
    """Open tickets that reached their escalation time to the next approver group: the packet
    is published again (same approval_id, one more group) and the escalation is audited."""
    due = await open_approvals.due(conn)
    rows, entries, updates = [], [], []
    for ticket in due:
        approval_id, call_id, tenant_id = ticket.approval_id, ticket.call_id, ticket.tenant_id
        contract = registry.get(ticket.tool_name, ticket.tool_version)
        request = codec().decode(bytes(ticket.request), StageRecord)
        groups = approver_groups(request, contract)  # the policy's, else the contract's
        current = ApprovalRequest.model_validate(ticket.packet)
        packet = escalated(current.model_copy(update={"escalation_level": ticket.escalation_level}), groups)
        created, expires, level = ticket.created_at_ms, ticket.expires_at_ms, packet.escalation_level
        next_ms = next_escalation_ms(contract, groups, created, expires, level)
        updates.append(
            {
                "approval_id": approval_id,
                "level": packet.escalation_level,
                "groups": packet.approver_groups,
                "packet": packet.model_dump(mode="json"),
                "next_ms": next_ms,
            }
        )
        address = Address.of(request.call, request.traceparent, key=approval_id)
        rows.append(outbox.record("approvals_requested", packet, address, tenant_topic=True))
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
        await open_approvals.record_escalations(conn, updates)
    await outbox_rows.enqueue(conn, rows, topics)
    await audit.append(conn, entries)
    return len(due)


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
            until_due = await open_approvals.until_due(conn)
        self.alarm.after(next_sweep_s(until_due, self.interval_s))
        if until_due is None or until_due > 0:
            return
        async with self.pool.connection() as conn, conn.transaction():
            await escalate_approvals(conn, self.registry, self.topics, STAGE)
            await expire_approvals(conn, self.topics, STAGE)

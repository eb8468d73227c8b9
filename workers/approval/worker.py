"""The approval-wait worker.

tool.authorized -> calls that need no approval go straight on to tool.executable; the others
get a ticket in Postgres and a confirmation packet on tool.approvals.requested (through the
outbox, with the ticket), and the agent hears that its call awaits approval.
tool.approvals.decisions -> each signed decision is judged against its ticket; enough
approvals release the call to tool.executable, a denial ends it, all through the outbox.
A sweep escalates tickets to the next approver group at the contract's fraction of their
window and AUTO_DENIES tickets past their expiry: never auto-approves.
A dry run needs no approval to be previewed: it goes on to tool.executable, which only
describes what would happen (the preview says how many approvals the real call needs).
"""

from __future__ import annotations

import json
from typing import Any

from toolgate.contracts.registry import Contract, Registry
from toolgate.faults import crash_point
from toolgate.hashing import idempotency_key_for
from toolgate.schemas.codec import codec
from toolgate.schemas.models import ApprovalDecision, StageRecord, Verdict
from toolgate.settings import Settings
from toolgate.topics.catalog import Topics
from toolgate.workers.approval import resume
from toolgate.workers.approval import tickets as tickets_io
from toolgate.workers.approval.decision import (
    APPROVED,
    DENIED,
    Counted,
    NoOp,
    Ticket,
    approval_id_for,
    confirmation_packet,
    expiry_for,
    judge,
    next_escalation_ms,
)
from toolgate.workers.runtime import audit, facts, outbox, target_state
from toolgate.workers.runtime.clock import now_ms
from toolgate.workers.runtime.db import make_pool
from toolgate.workers.runtime.emit import Emit
from toolgate.workers.runtime.handler import Handler, Inbound

STAGE = "approval-wait"

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


class AuthorizedHandler(Handler[StageRecord]):
    stage = STAGE
    source = "authorized"
    model = StageRecord

    def __init__(self, registry: Registry, settings: Settings) -> None:
        self.registry = registry
        self.topics = Topics(settings.topic_prefix)
        self.pool = make_pool(settings.database_url, STAGE)

    async def start(self) -> None:
        await self.pool.open()

    async def handle(self, calls: list[Inbound[StageRecord]], out: Emit) -> None:
        now = now_ms()
        waiting: list[tuple[Inbound[StageRecord], Contract]] = []
        for call in calls:
            record = call.model
            if record.required_approvals == 0 or record.dry_run:
                # Nothing to decide: forward the item's bytes as they came (no re-encoding).
                out.raw_item("executable", record.home_partition, call.raw)
                out.outcomes[record.call_id] = "forwarded"
                continue
            waiting.append((call, self.registry.get(record.tool_name, record.tool_version)))
        if not waiting:
            return
        async with self.pool.connection() as conn:
            wanted = facts.needed(ref for call, contract in waiting for ref in target_state.refs(call.model, contract))
            found = await facts.fetch(conn, wanted)
        held: dict[str, tuple[Inbound[StageRecord], Any, dict[str, Any]]] = {}
        for call, contract in waiting:
            record = call.model
            approval_id = approval_id_for(record.tenant_id, record.call_id)
            expires = expiry_for(record, contract, now)
            pending = record.model_copy(update={"traceparent": call.traceparent, "approval_id": approval_id})
            target = target_state.current(record, contract, found)
            state_version = target_state.bound_version(record, contract, found)
            key = idempotency_key_for(record)
            packet = confirmation_packet(
                pending, contract, approval_id, key, now, expires, target_state.shown(target), state_version
            )
            escalate_at = next_escalation_ms(contract, now, expires, 0)
            held[approval_id] = (
                call,
                packet,
                {
                    "approval_id": approval_id,
                    "call_id": record.call_id,
                    "tenant_id": record.tenant_id,
                    "run_id": record.run_id,
                    "tool_name": record.tool_name,
                    "tool_version": record.tool_version,
                    "payload_hash": record.payload_hash,
                    "risk_class": contract.side_effect_class,
                    "required_approvals": record.required_approvals,
                    "home_partition": record.home_partition,
                    "request": _b64(codec().encode(pending)),
                    "packet": packet.model_dump(mode="json"),
                    "expires_at_ms": expires,
                    "approver_groups": packet.approver_groups,
                    "escalate_at_ms": escalate_at,
                    "state_version": state_version,
                },
            )
        if not held:
            return
        async with self.pool.connection() as conn, conn.transaction():
            cur = await conn.execute(INSERT_TICKETS, (json.dumps([row for _, _, row in held.values()]),))
            created = {r[0] for r in await cur.fetchall()}
            rows: list[outbox.OutboxRow] = []
            entries = []
            for approval_id in created:
                call, packet, _ = held[approval_id]
                record = call.model
                rows += resume.announced(record, packet, call.traceparent, now)
                entries.append(
                    audit.Entry(
                        STAGE,
                        "approval_requested",
                        "toolgate",
                        record.call_id,
                        record.tenant_id,
                        {
                            "approval_id": approval_id,
                            "risk_class": packet.risk_class,
                            "required_approvals": record.required_approvals,
                            "expires_at_ms": packet.expires_at_ms,
                        },
                    )
                )
            # A ticket that already existed: the call came again (re-published, or re-driven).
            known = await resume.load(conn, [a for a in held if a not in created])
            for approval_id, ticket in known.items():
                call = held[approval_id][0]
                rows += resume.again(ticket, call.traceparent, now)
                entries.append(
                    audit.Entry(
                        STAGE,
                        "approval_resumed",
                        "toolgate",
                        call.model.call_id,
                        call.model.tenant_id,
                        {"approval_id": approval_id, "status": ticket.status},
                    )
                )
            await outbox.enqueue(conn, rows, self.topics)
            await audit.append(conn, entries)
        for approval_id, (call, _, _) in held.items():
            out.outcomes[call.model.call_id] = "held" if approval_id in created else "resumed"


def _b64(data: bytes) -> str:
    import base64

    return base64.b64encode(data).decode()


RECORD_DECISIONS = """
INSERT INTO toolgate.approval_decisions (decision_id, approval_id, approver_id, verdict, reason, decided_at)
SELECT d.decision_id, d.approval_id, d.approver_id, d.verdict, d.reason, to_timestamp(d.decided_at_ms / 1000.0)
FROM jsonb_to_recordset(%s::jsonb)
     AS d(decision_id text, approval_id text, approver_id text, verdict text, reason text, decided_at_ms bigint)
ON CONFLICT DO NOTHING
"""


class DecisionsHandler(Handler[ApprovalDecision]):
    stage = STAGE
    source = "approvals_decisions"
    model = ApprovalDecision

    def __init__(self, registry: Registry, settings: Settings) -> None:
        self.registry = registry
        self.topics = Topics(settings.topic_prefix)
        self.pool = make_pool(settings.database_url, f"{STAGE}-decisions")

    async def start(self) -> None:
        await self.pool.open()

    async def handle(self, calls: list[Inbound[ApprovalDecision]], out: Emit) -> None:
        ids = sorted({c.model.approval_id for c in calls})
        approver_ids = sorted({c.model.approver_id for c in calls})
        now = now_ms()
        async with self.pool.connection() as conn, conn.transaction():
            await tickets_io.lock(conn, ids)
            tickets, requests = await tickets_io.load(conn, ids)
            approvers = await tickets_io.approvers(conn, approver_ids)
            rows: list[outbox.OutboxRow] = []
            entries: list[audit.Entry] = []
            accepted: list[dict[str, Any]] = []
            for call in calls:
                decision = call.model
                ticket = tickets.get(decision.approval_id)
                verdict = judge(decision, ticket, approvers.get(decision.approver_id), now)
                detail = {
                    "approval_id": decision.approval_id,
                    "decision_id": decision.decision_id,
                    "verdict": str(decision.decision),
                }
                call_id = requests[decision.approval_id][0].call_id if decision.approval_id in requests else None
                if not isinstance(verdict, Counted):
                    kind = "noop" if isinstance(verdict, NoOp) else "refused"
                    entries.append(
                        audit.Entry(
                            STAGE,
                            f"decision_{kind}",
                            decision.approver_id,
                            call_id,
                            None,
                            {**detail, "code": verdict.code, "reason": verdict.reason},
                        )
                    )
                    out.outcomes[decision.approval_id] = f"{kind}:{verdict.code}"
                    continue
                assert ticket is not None
                accepted.append(
                    {
                        "decision_id": decision.decision_id,
                        "approval_id": decision.approval_id,
                        "approver_id": decision.approver_id,
                        "verdict": str(decision.decision),
                        "reason": decision.reason,
                        "decided_at_ms": decision.decided_at_ms,
                    }
                )
                tickets[ticket.approval_id] = Ticket(
                    **{
                        **ticket.__dict__,
                        "status": verdict.status,
                        "approved_by": verdict.approved_by,
                        "decided_by": (*ticket.decided_by, decision.approver_id),
                        "used_decisions": ticket.used_decisions | {decision.decision_id},
                    }
                )
                entries.append(
                    audit.Entry(
                        STAGE,
                        "decision_counted",
                        decision.approver_id,
                        call_id,
                        None,
                        {**detail, "status_after": verdict.status},
                    )
                )
                out.outcomes[decision.approval_id] = f"counted:{verdict.status}"
                record, _ = requests[ticket.approval_id]
                if verdict.status == APPROVED:
                    released = resume.released(record, verdict.approved_by, now)
                    rows.append(outbox.item("executable", record.home_partition, released))
                elif verdict.status == DENIED:
                    message = resume.denial(decision.approver_id, decision.reason)
                    closed = resume.closed(record, "approval_denied", message, now)
                    rows.append(outbox.item("results", record.home_partition, closed))
            if accepted:
                await conn.execute(RECORD_DECISIONS, (json.dumps(accepted),))
                closed = [(t.approval_id, t.status) for t in tickets.values() if t.status in (APPROVED, DENIED)]
                if closed:
                    await conn.execute(
                        "UPDATE toolgate.approvals a SET status = c.status, decided_at = now() "
                        "FROM unnest(%s::text[], %s::text[]) AS c(approval_id, status) "
                        "WHERE a.approval_id = c.approval_id AND a.status = 'PENDING'",
                        ([c[0] for c in closed], [c[1] for c in closed]),
                    )
            await outbox.enqueue(conn, rows, self.topics)
            await audit.append(conn, entries)
            if any(r.topic == "executable" for r in rows):
                crash_point("approval.during_release")


__all__ = ["AuthorizedHandler", "DecisionsHandler", "Verdict"]

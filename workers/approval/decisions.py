"""Approval-wait on tool.approvals.decisions: each signed decision applied to its ticket.
An approver's edit is checked against the held call's contract first (edited.py); counted, it
closes the ticket as EDITED and re-enters the edited call on tool.proposals through the outbox.

The tickets are locked and read, each decision becomes a `Transition` (decision.py, which
holds the table of what a decision does), and the handler applies them in one transaction:
counted decisions and closed tickets written, enough approvals releasing the call to
tool.executable and a denial ending it on tool.results (and releasing what it reserved of its
value budgets: store/values.py), all through the outbox, each decision
audited: a signed one in that transaction (a withdrawal by the call's own agent, signed with its
key, is judged by withdrawal.py and ends the call like a denial), one that proves nobody (`decision.proves_nobody`)
collapsed into counts by the runtime (workers/runtime/refusals.py), its values bounded.
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from toolgate import refusal
from toolgate.contracts.edits import Edited
from toolgate.contracts.registry import Registry
from toolgate.faults import crash_point
from toolgate.schemas.hashing import usage_events
from toolgate.schemas.models import ApprovalDecision, StageRecord
from toolgate.settings import Settings
from toolgate.states import TicketStatus
from toolgate.store import audit, values
from toolgate.store import outbox as outbox_rows
from toolgate.store.audit_entry import bounded
from toolgate.store.outbox import OutboxRow
from toolgate.topics.headers import Address
from toolgate.workers.approval import edited, resume, tickets, withdrawal
from toolgate.workers.approval.decision import STAGE, Approver, Then, Ticket, Transition, proves_nobody, transition
from toolgate.workers.runtime import outbox
from toolgate.workers.runtime.clock import now_ms
from toolgate.workers.runtime.emit import Emit
from toolgate.workers.runtime.handler import Handler, Inbound
from toolgate.workers.runtime.refusals import Refusal


class DecisionsHandler(Handler[ApprovalDecision]):
    stage = STAGE
    source = "approvals_decisions"
    model = ApprovalDecision

    def __init__(self, registry: Registry, settings: Settings) -> None:
        super().__init__(registry, settings, f"{STAGE}-decisions")

    async def handle(self, calls: list[Inbound[ApprovalDecision]], out: Emit) -> None:
        ids = sorted({c.model.approval_id for c in calls})
        names = {c.model.approver_id for c in calls}
        agent_ids = sorted({a for n in names if (a := withdrawal.agent_of(n)) is not None})
        now = now_ms()
        async with self.pool.connection() as conn, conn.transaction():
            await tickets.lock(conn, ids)
            held, requests = await tickets.load(conn, ids)
            approvers = await tickets.approvers(conn, sorted(n for n in names if withdrawal.agent_of(n) is None))
            requesters = await tickets.requesters(conn, agent_ids) if agent_ids else {}
            rows: list[OutboxRow] = []
            entries: list[audit.Entry] = []
            counted: list[ApprovalDecision] = []
            for call in calls:
                decision = call.model
                approver = approvers.get(decision.approver_id)
                request = requests.get(decision.approval_id)
                edit = self._edit(decision, request)
                step = _step(decision, held.get(decision.approval_id), approver, requesters, now, edit)
                call_id = request.call.call_id if request is not None else None
                if proves_nobody(decision, step, approver):
                    out.refusals.append(Refusal(unproven_entry(decision, step, call_id), self.source))
                else:
                    entries.append(audit.Entry(STAGE, step.action, decision.approver_id, call_id, None, step.detail))
                out.outcomes[decision.approval_id] = step.outcome
                if step.counted and step.ticket is not None and request is not None:
                    held[decision.approval_id] = step.ticket
                    counted.append(decision)
                    rows += said(step, decision, request, now)
            if counted:
                keys = {a.approver_id: a.public_key for a in approvers.values()}
                await self._apply(conn, counted, held, requests, keys)
            await outbox_rows.enqueue(conn, rows, self.topics)
            await audit.append(conn, entries)
            if any(r.topic == "executable" for r in rows):
                crash_point("approval.during_release")

    def _edit(self, decision: ApprovalDecision, request: StageRecord | None) -> Edited | refusal.Refusal | None:
        """An edit decision checked against its held call's contract (None: not an edit)."""
        if decision.edited_arguments is None or request is None:
            return None
        contract = self.registry.get(request.call.tool_name, request.call.tool_version)
        return edited.check(decision, contract, request.call.arguments)

    @staticmethod
    async def _apply(
        conn: AsyncConnection[Any],
        counted: list[ApprovalDecision],
        held: dict[str, Ticket],
        requests: dict[str, StageRecord],
        keys: dict[str, bytes],
    ) -> None:
        """The counted decisions and the tickets they closed; a denied or edited call's value
        released (the held payload of an edited call for good: it never runs; the edited call
        reserves its own when policy allows it)."""
        await tickets.record_decisions(conn, counted, keys)
        decided = (TicketStatus.APPROVED, TicketStatus.DENIED, TicketStatus.EDITED)
        await tickets.close(conn, [t for t in held.values() if t.status in decided])
        edits = [d for d in counted if d.edited_arguments is not None and held[d.approval_id].status == "EDITED"]
        await tickets.mark_edited(conn, edits)
        for status, ended in ((TicketStatus.DENIED, False), (TicketStatus.EDITED, True)):
            closed = [requests[a] for a, t in held.items() if t.status == status and a in requests]
            await values.release(conn, [e for r in closed for e in usage_events(r.call)], ended=ended)


def _step(
    decision: ApprovalDecision,
    ticket: Ticket | None,
    approver: Approver | None,
    requesters: dict[str, withdrawal.Requester],
    now: int,
    edit: Edited | refusal.Refusal | None,
) -> Transition:
    """An approver's decision judged as one (`edit`: its edit checked, edited.py), a requester's
    withdrawal as one (withdrawal.py)."""
    agent = withdrawal.agent_of(decision.approver_id)
    if agent is None:
        return transition(decision, ticket, approver, now, edit)
    return withdrawal.transition(decision, ticket, requesters.get(agent), now)


def unproven_entry(decision: ApprovalDecision, step: Transition, call_id: str | None) -> audit.Entry:
    """The audit entry of a decision that proves nobody: what it claims, bounded, and why it was
    refused (its code; the reason, which quotes what it claims, is left out)."""
    detail = {
        "approval_id": bounded(decision.approval_id),
        "decision_id": bounded(decision.decision_id),
        "verdict": str(decision.decision),
        "code": step.detail.get("code"),
        "proven": False,
    }
    return audit.Entry(STAGE, step.action, bounded(decision.approver_id) or "unknown", call_id, None, detail)


def said(step: Transition, decision: ApprovalDecision, request: StageRecord, now: int) -> list[OutboxRow]:
    """What a counted decision publishes: the release, the denial, or nothing yet."""
    if step.then is Then.RELEASE and step.ticket is not None:
        released = resume.released(request, step.ticket.approved_by, now)
        return [outbox.item("executable", request.call.home_partition, released)]
    if step.then is Then.REENTER:
        proposal = edited.reentry(request, decision, now)
        call = request.call
        return [outbox.record("proposals", proposal, Address.of(call, request.traceparent, key=call.run_id))]
    if step.then is Then.DENY:
        message = resume.denial(decision.approver_id, decision.reason)
        closed = resume.closed(request, "approval_denied", message, now)
        return [outbox.item("results", request.call.home_partition, closed)]
    if step.then is Then.WITHDRAW:
        agent = withdrawal.agent_of(decision.approver_id) or decision.approver_id
        closed = resume.closed(request, withdrawal.ERROR_CODE, withdrawal.message(agent, decision.reason), now)
        return [outbox.item("results", request.call.home_partition, closed)]
    return []

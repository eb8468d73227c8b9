"""What approval-wait says about a ticket it already holds, and the records every ticket
transition writes.

A held call reaches approval-wait again when its agent re-published it (the broker lost the
call, or its answer) or when toolgate re-drives what Postgres says is in flight after the
transport lost it. The ticket in Postgres decides what is said, never the message:

    PENDING      -> its confirmation packet again (as stored: escalations included), and the
                    interim answer (awaiting approval)
    APPROVED     -> the call released to execution again, with the approvers of record;
                    execution replays an effect that already ran (its key or its ticket)
    DENIED       -> the denial again (the withdrawal again, when its requester withdrew it)
    AUTO_DENIED  -> the expiry again
    EDITED       -> nothing: an approver's edit re-entered the call, and the edited call answers it

Repeating is safe by construction: approvers dedupe packets by approval_id, execution by
idempotency key and ticket, agents by call_id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

from toolgate.schemas.codec import codec
from toolgate.schemas.models import (
    ApprovalRequest,
    ExecutionResult,
    FieldError,
    StageDecision,
    StageRecord,
    TaxonomyClass,
)
from toolgate.states import StageOutcome, TicketStatus
from toolgate.store import approvals
from toolgate.store.outbox import OutboxRow
from toolgate.topics.headers import Address
from toolgate.workers.approval import withdrawal
from toolgate.workers.approval.decision import STAGE
from toolgate.workers.runtime import outbox
from toolgate.workers.runtime.results import outcome, reject_record, result_record


@dataclass(frozen=True)
class Held:
    """A ticket as Postgres holds it, with what is needed to say it again."""

    approval_id: str
    status: TicketStatus
    request: StageRecord  # the call as it was held
    packet: ApprovalRequest
    approved_by: tuple[str, ...]
    denied_by: str | None
    denial_reason: str | None


async def load(conn: AsyncConnection[Any], approval_ids: list[str]) -> dict[str, Held]:
    return {
        r.approval_id: Held(
            r.approval_id,
            TicketStatus(r.status),
            codec().decode(bytes(r.request), StageRecord),
            ApprovalRequest.model_validate(r.packet),
            tuple(r.approved_by),
            r.denied_by,
            r.denial_reason,
        )
        for r in await approvals.held(conn, approval_ids)
    }


def announced(record: StageRecord, packet: ApprovalRequest, traceparent: str, now: int) -> list[OutboxRow]:
    """A held call's packet for its approvers and the interim answer for its agent."""
    approval_id = packet.approval_id
    address = Address.of(record.call, traceparent, key=approval_id)
    waiting = outcome(TaxonomyClass.CONFIRMATION_MISSING, code=202, is_error=False, fail_closed=False)
    approval = {
        "approval_id": approval_id,
        "required_approvals": record.required_approvals,
        "expires_at_ms": packet.expires_at_ms,
        "status": str(TicketStatus.PENDING),
    }
    interim = result_record(
        record, waiting, STAGE, traceparent, now, data={"approval": approval}, approval_id=approval_id
    )
    return [
        outbox.record("approvals_requested", packet, address, tenant_topic=True),
        outbox.item("results", record.call.home_partition, interim),
    ]


def released(record: StageRecord, approved_by: tuple[str, ...], now: int) -> StageRecord:
    """The held call, released to execution with the approvers that approved it."""
    return record.model_copy(
        update={
            "approvers": list(approved_by),
            "decisions": [
                *record.decisions,
                StageDecision(stage=STAGE, outcome=StageOutcome.APPROVED, detail=",".join(approved_by), at_ms=now),
            ],
        }
    )


def closed(record: StageRecord, code: str, message: str, now: int) -> ExecutionResult:
    """The call's end when its approval was denied, withdrawn or expired: fail closed, nothing ran."""
    denied = code != "approval_expired"
    actual = {"approval_denied": "denied", withdrawal.ERROR_CODE: "withdrawn"}.get(code, "expired")
    error = FieldError(
        field="approval",
        code=code,
        message=message,
        expected="enough valid approvals before expiry",
        actual=actual,
    )
    return reject_record(
        record,
        TaxonomyClass.CONFIRMATION_MISSING,
        [error],
        STAGE,
        record.traceparent,
        now,
        approval_id=record.approval_id,
        next_action="stop" if denied else "repropose_or_escalate",
    )


def denial(denied_by: str | None, reason: str | None) -> str:
    return f"{denied_by or 'an approver'} denied the approval" + (f": {reason}" if reason else "")


def denied_again(held: Held, now: int) -> ExecutionResult:
    """A DENIED ticket's end said again: its denial, or its requester's withdrawal."""
    agent = withdrawal.agent_of(held.denied_by or "")
    if agent is not None:
        return closed(held.request, withdrawal.ERROR_CODE, withdrawal.message(agent, held.denial_reason), now)
    return closed(held.request, "approval_denied", denial(held.denied_by, held.denial_reason), now)


def expiry(approval_id: str) -> str:
    return f"approval {approval_id} expired without enough approvals: AUTO_DENIED"


def again(held: Held, traceparent: str, now: int) -> list[OutboxRow]:
    """What to say again about a ticket, per the table in the module docstring."""
    record = held.request
    if held.status == TicketStatus.PENDING:
        return announced(record, held.packet, traceparent, now)
    if held.status == TicketStatus.APPROVED:
        return [outbox.item("executable", record.call.home_partition, released(record, held.approved_by, now))]
    if held.status == TicketStatus.EDITED:
        return []
    if held.status == TicketStatus.DENIED:
        return [outbox.item("results", record.call.home_partition, denied_again(held, now))]
    message = expiry(held.approval_id)  # AUTO_DENIED, the one status left
    return [outbox.item("results", record.call.home_partition, closed(record, "approval_expired", message, now))]

"""Execution's own check that a call may run: Postgres decides, not the message.

Pure: the call, its contract, the operation key it would run under, and the approval ticket
read from Postgres (under FOR UPDATE) come in; a verdict comes out.

| what execution finds                                             | verdict                               |
|------------------------------------------------------------------|---------------------------------------|
| the arguments do not hash to the record's payload hash           | Blocked SIGNATURE_MISMATCH            |
| the call needs no approval (contract, side-effect class, policy) | Cleared, nothing to consume           |
| it needs approvals and no ticket exists for its call_id          | Blocked CONFIRMATION_MISSING          |
| the ticket is not APPROVED                                       | Blocked CONFIRMATION_MISSING          |
| the ticket is for another call, tenant, tool, version or payload | Blocked CONFIRMATION_MISSING          |
| the ticket was consumed by another operation                     | Blocked CONFIRMATION_MISSING          |
| fewer distinct, active approvers of the call's tenant approved   | Blocked CONFIRMATION_MISSING          |
| than the call needs (each still allowed the ticket's risk class  |                                       |
| and in a group it reached, as approval-wait counted them)        |                                       |
| otherwise                                                        | Cleared: consume the ticket (its key) |

and once the key is planned (`spent`): a ticket whose operation already reached a final state
is spent, and an operation planned to execute under it is Blocked CONFIRMATION_MISSING
(`approval_spent`); a replay of its stored outcome is not an execution, and goes on.

The number of approvals a call needs is the most of what its side-effect class demands,
its contract says and the policy stage decided (`record.required_approvals`): a record that
claims fewer gains nothing. A ticket releases one operation: the worker consumes it under the
operation's idempotency key in the reservation's transaction, so a retry or re-drive of that
operation (same key) runs under it again and anything else finds it consumed, until the
operation ends: then the ticket is spent (recording.py), and nothing executes under it again,
whatever became of the key (expired, pruned to a tombstone). A ticket bound to the target's
state is then checked against the state read now (`stale`).
"""

from __future__ import annotations

from dataclasses import dataclass

from toolgate.contracts.contract import Contract
from toolgate.schemas.hashing import payload_hash
from toolgate.schemas.models import StageRecord, TaxonomyClass
from toolgate.states import TicketStatus
from toolgate.store.rows import Ticket as Ticket  # what a call is cleared by
from toolgate.workers.approval.decision import ticket_of
from toolgate.workers.execution.answers import Blocked as Blocked  # its refusals
from toolgate.workers.execution.idempotency import Execute
from toolgate.workers.policy.decision import MIN_APPROVALS


@dataclass(frozen=True)
class Cleared:
    ticket: Ticket | None  # to consume (and whose state to check); None: no approval needed


def approvals_needed(record: StageRecord, contract: Contract) -> int:
    return max(MIN_APPROVALS.get(contract.side_effect_class, 0), contract.required_approvals, record.required_approvals)


def ticket_id(record: StageRecord) -> str:
    """The ticket a call's approval lives in: derived from its call_id (an edited call's, from its
    payload hash too), never read from the record's approval_id."""
    return ticket_of(record)


def hash_intact(record: StageRecord) -> Blocked | None:
    """The arguments about to run must hash to what validation hashed (and approvers signed)."""
    if payload_hash(record.call.arguments) == record.call.payload_hash:
        return None
    return Blocked(
        "payload_hash_mismatch",
        "the arguments do not match the payload hash they were validated and approved under; nothing ran",
        TaxonomyClass.SIGNATURE_MISMATCH,
    )


def clear(record: StageRecord, contract: Contract, operation: str, ticket: Ticket | None) -> Cleared | Blocked:
    needed = approvals_needed(record, contract)
    if needed == 0:
        return Cleared(None)

    def missing(code: str, reason: str) -> Blocked:
        return Blocked(code, reason, TaxonomyClass.CONFIRMATION_MISSING)

    if ticket is None:
        return missing("no_approval", f"{contract.name} needs {needed} approval(s) and none was given for this call")
    if ticket.status != TicketStatus.APPROVED:
        return missing("approval_not_granted", f"approval {ticket.approval_id} is {ticket.status}, not APPROVED")
    if (ticket.call_id, ticket.tenant_id, ticket.tool_name, ticket.tool_version, ticket.payload_hash) != (
        record.call.call_id,
        record.call.tenant_id,
        record.call.tool_name,
        record.call.tool_version,
        record.call.payload_hash,
    ):
        return missing("approval_mismatch", f"approval {ticket.approval_id} was given for another call or payload")
    if ticket.consumed_by not in (None, operation):
        return missing("approval_consumed", f"approval {ticket.approval_id} already released another operation")
    if ticket.approvers < max(needed, ticket.required_approvals):
        return missing(
            "too_few_approvers",
            f"approval {ticket.approval_id} has {ticket.approvers} valid approver(s); "
            f"{max(needed, ticket.required_approvals)} are needed",
        )
    return Cleared(ticket)


def spent(ticket: Ticket | None, plan: object) -> Blocked | None:
    """CONFIRMATION_MISSING when a spent ticket would release its operation to execute again
    (`plan`: the key's idempotency plan; a replay of the stored outcome is no execution)."""
    if ticket is None or not ticket.spent or not isinstance(plan, Execute):
        return None
    return Blocked(
        "approval_spent",
        f"approval {ticket.approval_id} released its operation, which already ended; nothing ran. "
        "A new operation needs a new approval",
        TaxonomyClass.CONFIRMATION_MISSING,
    )


def stale(ticket: Ticket | None, state_now: str | None) -> Blocked | None:
    """STALE_STATE when the target moved since the approver saw it (`state_now`: its version)."""
    if ticket is None or ticket.state_version is None or state_now == ticket.state_version:
        return None
    return Blocked(
        "state_changed",
        "the target changed after it was approved; nothing ran. Refresh state and propose again",
        TaxonomyClass.STALE_STATE,
    )


def consumed_elsewhere(ticket: Ticket | None) -> Blocked:
    """CONFIRMATION_MISSING when the ticket released another operation after it was cleared."""
    return Blocked(
        "approval_consumed",
        f"approval {ticket.approval_id if ticket is not None else '?'} released another operation meanwhile",
        TaxonomyClass.CONFIRMATION_MISSING,
    )

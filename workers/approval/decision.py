"""Approval decisions: what a signed decision does to a ticket.

Pure: the ticket, the approver's registered key and the time come in; a verdict comes out.
A decision counts only when it is signed by a registered, active approver registered for the
ticket's tenant, allowed for the ticket's risk class and in one of the approver groups the
ticket has reached (an approver of one tenant never counts toward another's), acting as
someone other than the held call's requesting user (`self_approval`: no one approves, or denies,
a call they requested themselves; the ticket stays PENDING for the others), names the
same payload hash, tool, version and target state (and, when it names them, the held call's
trace and the single_execution scope), is within its own expiry and the ticket's, and has not
been used before. The same approver deciding twice is a no-op with a clear answer,
never a second vote.

`transition` turns the verdict into what approval-wait applies, one row of this table:

    verdict                     ticket after                      says              audit
    Refusal(code)               unchanged                         nothing           decision_refused
    NoOp(code)                  unchanged                         nothing           decision_noop
    Counted(PENDING)            one more approver, still PENDING  nothing           decision_counted
    Counted(APPROVED)           APPROVED                          RELEASE the call  decision_counted
    Counted(DENIED)             DENIED                            DENY the call     decision_counted
    Counted(EDITED)             EDITED (an approver's edit that   REENTER the       decision_counted
                                only narrows: contracts/edits.py)   edited call
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from toolgate.contracts.edits import Edited
from toolgate.refusal import Refusal
from toolgate.schemas.hashing import fingerprint
from toolgate.schemas.models import ApprovalDecision, StageRecord, Verdict
from toolgate.states import StageOutcome, TicketStatus
from toolgate.store.rows import Approver as Approver  # who decides, as the store reads it
from toolgate.store.rows import OpenTicket
from toolgate.trust.signing import SINGLE_EXECUTION, verify
from toolgate.workers.runtime.passages import Decided

STAGE = "approval-wait"


Ticket = OpenTicket  # what a decision is judged against, as the store reads it


@dataclass(frozen=True)
class Counted:
    """The decision counts; `status` is the ticket's status after it."""

    status: TicketStatus
    approved_by: tuple[str, ...]


@dataclass(frozen=True)
class NoOp(Refusal):
    """A repeat of something already counted: answered, not counted again."""


def judge(
    decision: ApprovalDecision,
    ticket: Ticket | None,
    approver: Approver | None,
    now_ms: int,
    edit: Edited | Refusal | None = None,
) -> Counted | NoOp | Refusal:
    """`edit`: what contracts/edits.py made of an edit decision's arguments (workers/approval/
    edited.py `check`); an edit decision judged without it is refused."""
    if ticket is None:
        return Refusal("unknown_approval", f"no approval {decision.approval_id} is waiting")
    if decision.decision_id in ticket.used_decisions:
        return NoOp("duplicate_decision", f"decision {decision.decision_id} was already recorded")
    if approver is None or not approver.active:
        return Refusal("unknown_approver", f"{decision.approver_id} is not a registered, active approver")
    if not verify(decision, approver.public_key):
        return Refusal("bad_signature", f"the signature does not verify against {approver.approver_id}'s key")
    if decision.approver_id in ticket.decided_by:
        return NoOp(
            "already_decided", f"{decision.approver_id} already decided on {ticket.approval_id}; not counted twice"
        )
    refused = open_for(decision, ticket, "decision")
    if refused is not None:
        return refused
    if ticket.state_version is not None and decision.state_version != ticket.state_version:
        return Refusal(
            "state_mismatch", "the decision names another state of the target than the one the approver was shown"
        )
    if decision.trace_id is not None and decision.trace_id != ticket.trace_id:
        return Refusal("trace_mismatch", "the decision names another trace than the held call's")
    if decision.approval_scope not in (None, SINGLE_EXECUTION):
        return Refusal(
            "scope_not_granted", f"an approval is for {SINGLE_EXECUTION} only, not {decision.approval_scope}"
        )
    if decision.expires_at_ms < now_ms:
        return Refusal("decision_expired", "the decision expired before it arrived")
    if ticket.expires_at_ms < now_ms:
        return Refusal("approval_expired", f"approval {ticket.approval_id} expired")
    refused = not_theirs_to_decide(ticket, approver)
    if refused is not None:
        return refused
    if decision.edited_arguments is not None:
        return judged_edit(decision, edit)
    if decision.decision is Verdict.DENY:
        return Counted(TicketStatus.DENIED, ticket.approved_by)
    approved_by = (*ticket.approved_by, decision.approver_id)
    enough = len(approved_by) >= ticket.required_approvals
    return Counted(TicketStatus.APPROVED if enough else TicketStatus.PENDING, approved_by)


def open_for(decision: ApprovalDecision, ticket: Ticket, what: str) -> Refusal | None:
    """Why a signed `what` (a decision, a withdrawal) cannot count on `ticket`, whoever made it: the
    ticket closed, or another payload, tool or version named than the held call's (None: it can)."""
    if ticket.status != TicketStatus.PENDING:
        return Refusal("approval_closed", f"approval {ticket.approval_id} is already {ticket.status}")
    named = (decision.payload_hash, decision.tool_name, decision.tool_version)
    if named != (ticket.payload_hash, ticket.tool_name, ticket.tool_version):
        return Refusal("payload_mismatch", f"the {what} names another payload hash, tool or version than the held call")
    return None


def judged_edit(decision: ApprovalDecision, edit: Edited | Refusal | None) -> Counted | Refusal:
    """An approver's edit, otherwise valid: refused unless it only narrows; counted, it closes the
    ticket as EDITED (nothing runs for the held arguments) and the edited call re-enters."""
    if decision.decision is not Verdict.APPROVE:
        return Refusal("edit_not_approve", "an edit approves edited arguments; a denial carries none")
    if edit is None:
        return Refusal("edit_unchecked", "the edit was not checked against the call's contract")
    if isinstance(edit, Refusal):
        return edit
    return Counted(TicketStatus.EDITED, (decision.approver_id,))


def not_theirs_to_decide(ticket: Ticket, approver: Approver) -> Refusal | None:
    """Why this approver may not decide this ticket (its tenant, risk class, groups, or a call
    requested by a user the approver acts as); None: it may."""
    if ticket.tenant_id not in approver.tenants:
        return Refusal(
            "approver_not_for_tenant", f"{approver.approver_id} is not an approver of tenant {ticket.tenant_id}"
        )
    if ticket.risk_class not in approver.risk_classes:
        return Refusal("approver_not_allowed", f"{approver.approver_id} may not approve {ticket.risk_class} calls")
    if ticket.groups and not set(ticket.groups) & set(approver.groups):
        return Refusal(
            "approver_not_in_group",
            f"{approver.approver_id} is in none of the groups this approval has reached: {', '.join(ticket.groups)}",
        )
    if ticket.requested_by in approver.acts_as:
        return Refusal(
            "self_approval",
            f"{approver.approver_id} acts as the user who requested this call; another approver must decide it",
        )
    return None


class Then(StrEnum):
    """What approval-wait says after a decision, besides the audit entry."""

    NOTHING = "nothing"
    RELEASE = "release"  # the held call goes on to tool.executable with its approvers of record
    REENTER = "reenter"  # an approver's edit: the edited call goes back to tool.proposals
    DENY = "deny"  # the call ends on tool.results: approval_denied, nothing runs
    WITHDRAW = "withdraw"  # its requester withdrew it: the call ends on tool.results, approval_withdrawn


@dataclass(frozen=True)
class Transition:
    """One signed decision applied to its ticket: a row of the table in the module docstring."""

    ticket: Ticket | None  # the ticket after the decision (as it was, unless counted)
    counted: bool  # the decision is recorded in approval_decisions
    then: Then
    action: str  # the audit action
    detail: dict[str, Any]  # the audit detail
    outcome: Decided  # the round's outcome for the decision


def transition(
    decision: ApprovalDecision,
    ticket: Ticket | None,
    approver: Approver | None,
    now_ms: int,
    edit: Edited | Refusal | None = None,
) -> Transition:
    return applied(decision, ticket, judge(decision, ticket, approver, now_ms, edit))


def applied(
    decision: ApprovalDecision,
    ticket: Ticket | None,
    verdict: Counted | NoOp | Refusal,
    *,
    kind: str = "decision",
    denied: Then = Then.DENY,
) -> Transition:
    """A verdict on a decision as approval-wait applies it (`kind` names its audit actions, `denied`
    what a counted denial says: a withdrawal, withdrawal.py, is a denial by the requester)."""
    detail: dict[str, Any] = {
        "approval_id": decision.approval_id,
        "decision_id": decision.decision_id,
        "verdict": str(decision.decision),
    }
    if not isinstance(verdict, Counted):
        said = "noop" if isinstance(verdict, NoOp) else "refused"
        audited = {**detail, "code": verdict.code, "reason": verdict.reason}
        return Transition(ticket, False, Then.NOTHING, f"{kind}_{said}", audited, Decided(f"{said}:{verdict.code}"))
    assert ticket is not None  # no verdict counts anything without a ticket
    after = replace(
        ticket,
        status=verdict.status,
        approved_by=verdict.approved_by,
        decided_by=(*ticket.decided_by, decision.approver_id),
        used_decisions=ticket.used_decisions | {decision.decision_id},
    )
    thens = {TicketStatus.APPROVED: Then.RELEASE, TicketStatus.DENIED: denied, TicketStatus.EDITED: Then.REENTER}
    then = thens.get(verdict.status, Then.NOTHING)
    status_after = str(verdict.status)
    audited = {**detail, "status_after": status_after}
    return Transition(after, True, then, f"{kind}_counted", audited, Decided(f"counted:{status_after}"))


# Refusals judged before any registered approver's signature was checked: the decision proves
# nobody (a decision id already used proves someone only when its signature verifies).
BEFORE_THE_SIGNATURE = frozenset({"unknown_approval", "duplicate_decision", "unknown_approver", "bad_signature"})


def proves_nobody(decision: ApprovalDecision, step: Transition, approver: Approver | None) -> bool:
    """Whether a decision not counted was signed by no registered, active approver as far as
    `judge` checked: its refusal is audited collapsed into counts, every value from it bounded
    (workers/runtime/refusals.py); a signed decision's is audited one row each."""
    code = str(step.detail.get("code", ""))
    if step.counted or code not in BEFORE_THE_SIGNATURE:
        return False
    if code == "duplicate_decision" and approver is not None and approver.active:
        return not verify(decision, approver.public_key)  # a signed decision delivered again
    return True


def approval_id_for(tenant_id: str, call_id: str, edited_payload: str | None = None) -> str:
    """Deterministic, so a redelivered call finds its existing ticket; a call_id is unique
    only within its tenant, so the tenant is part of it. An approver's edit of a call is the same
    call with another payload: its ticket is named by the edited payload hash as well."""
    edited = "" if edited_payload is None else f":{edited_payload}"
    return "appr_" + fingerprint(f"{len(tenant_id)}:{tenant_id}:{call_id}{edited}", 24)


def edit_of(record: StageRecord) -> dict[str, Any] | None:
    """What validation recorded of an approver's edit that re-entered this call ({approval_id,
    edited_by, decision_id}: workers/validation/edits.py), or None: the call is as its agent
    proposed it. Stage records are sealed by the stages (the MAC), so this is validation's word."""
    for d in record.decisions:
        if d.stage == "validation" and d.outcome == StageOutcome.EDITED:
            found: dict[str, Any] = json.loads(d.detail or "{}")
            return found
    return None


def ticket_of(record: StageRecord) -> str:
    """The ticket a call's approval lives in, derived from its call_id (and, for an edited call,
    its payload hash), never read from the record's approval_id."""
    edited = record.call.payload_hash if edit_of(record) is not None else None
    return approval_id_for(record.call.tenant_id, record.call.call_id, edited)

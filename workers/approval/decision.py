"""Approval decisions: what a signed decision does to a ticket, and the confirmation packet.

Pure: the ticket, the approver's registered key and the time come in; a verdict comes out.
A decision counts only when it is signed by a registered, active approver allowed for the
ticket's risk class and in one of the approver groups the ticket has reached, names the
same payload hash, tool, version and target state, is within its own expiry and the
ticket's, and has not been used before. The same approver deciding twice is a no-op with a clear answer,
never a second vote.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from toolgate.contracts.registry import Contract
from toolgate.hashing import fingerprint
from toolgate.schemas.models import ApprovalDecision, ApprovalRequest, StageRecord, Verdict
from toolgate.signing import verify
from toolgate.topics.headers import trace_id_of

APPROVED, DENIED, PENDING, AUTO_DENIED = "APPROVED", "DENIED", "PENDING", "AUTO_DENIED"


@dataclass(frozen=True)
class Ticket:
    approval_id: str
    tool_name: str
    tool_version: str
    payload_hash: str
    risk_class: str
    required_approvals: int
    status: str
    expires_at_ms: int
    approved_by: tuple[str, ...] = ()
    decided_by: tuple[str, ...] = ()
    used_decisions: frozenset[str] = field(default_factory=frozenset)
    groups: tuple[str, ...] = ()  # the approver groups reached so far; empty: any allowed approver
    state_version: str | None = None  # the target's state the approver was shown


@dataclass(frozen=True)
class Approver:
    approver_id: str
    public_key: bytes
    risk_classes: tuple[str, ...]
    active: bool
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class Counted:
    """The decision counts; `status` is the ticket's status after it."""

    status: str
    approved_by: tuple[str, ...]


@dataclass(frozen=True)
class NoOp:
    """A repeat of something already counted: answered, not counted again."""

    code: str
    reason: str


@dataclass(frozen=True)
class Refused:
    code: str
    reason: str


def judge(
    decision: ApprovalDecision, ticket: Ticket | None, approver: Approver | None, now_ms: int
) -> Counted | NoOp | Refused:
    if ticket is None:
        return Refused("unknown_approval", f"no approval {decision.approval_id} is waiting")
    if decision.decision_id in ticket.used_decisions:
        return NoOp("duplicate_decision", f"decision {decision.decision_id} was already recorded")
    if approver is None or not approver.active:
        return Refused("unknown_approver", f"{decision.approver_id} is not a registered, active approver")
    if not verify(decision, approver.public_key):
        return Refused("bad_signature", f"the signature does not verify against {approver.approver_id}'s key")
    if decision.approver_id in ticket.decided_by:
        return NoOp(
            "already_decided", f"{decision.approver_id} already decided on {ticket.approval_id}; not counted twice"
        )
    if ticket.status != PENDING:
        return Refused("approval_closed", f"approval {ticket.approval_id} is already {ticket.status}")
    if (decision.payload_hash, decision.tool_name, decision.tool_version) != (
        ticket.payload_hash,
        ticket.tool_name,
        ticket.tool_version,
    ):
        return Refused(
            "payload_mismatch", "the decision names another payload hash, tool or version than the held call"
        )
    if ticket.state_version is not None and decision.state_version != ticket.state_version:
        return Refused(
            "state_mismatch", "the decision names another state of the target than the one the approver was shown"
        )
    if decision.expires_at_ms < now_ms:
        return Refused("decision_expired", "the decision expired before it arrived")
    if ticket.expires_at_ms < now_ms:
        return Refused("approval_expired", f"approval {ticket.approval_id} expired")
    if ticket.risk_class not in approver.risk_classes:
        return Refused("approver_not_allowed", f"{approver.approver_id} may not approve {ticket.risk_class} calls")
    if ticket.groups and not set(ticket.groups) & set(approver.groups):
        return Refused(
            "approver_not_in_group",
            f"{approver.approver_id} is in none of the groups this approval has reached: {', '.join(ticket.groups)}",
        )
    if decision.decision is Verdict.DENY:
        return Counted(DENIED, ticket.approved_by)
    approved_by = (*ticket.approved_by, decision.approver_id)
    return Counted(APPROVED if len(approved_by) >= ticket.required_approvals else PENDING, approved_by)


def approval_id_for(tenant_id: str, call_id: str) -> str:
    """Deterministic, so a redelivered call finds its existing ticket; a call_id is unique
    only within its tenant, so the tenant is part of it."""
    return "appr_" + fingerprint(f"{len(tenant_id)}:{tenant_id}:{call_id}", 24)


def _fill(template: str, values: dict[str, Any]) -> str:
    return re.sub(r"\{([A-Za-z0-9_]+)\}", lambda m: str(values.get(m.group(1), m.group(0))), template)


def consequence_of(arguments: dict[str, Any], contract: Contract) -> str:
    """The contract's plain-language consequence with this call's arguments filled in."""
    confirmation = contract.binding.get("confirmation") or {}
    return _fill(confirmation.get("consequence") or contract.document["affordance"]["model_description"], arguments)


def confirmation_packet(
    record: StageRecord,
    contract: Contract,
    approval_id: str,
    idempotency_key: str,
    now_ms: int,
    expires_at_ms: int,
    before_state: dict[str, Any] | None,
    state_version: str | None = None,
) -> ApprovalRequest:
    """The packet an approver sees; it goes first to the first of the contract's groups."""
    confirmation = contract.binding.get("confirmation") or {}
    action = confirmation.get("action") or contract.name
    consequence = consequence_of(record.arguments, contract)
    return ApprovalRequest(
        approval_id=approval_id,
        call_id=record.call_id,
        trace_id=trace_id_of(record.traceparent),
        tenant_id=record.tenant_id,
        run_id=record.run_id,
        requested_by=record.principal,
        tool_name=record.tool_name,
        tool_version=record.tool_version,
        action=action,
        consequence=consequence,
        arguments=record.arguments,
        before_state=before_state,
        expected_after_state=confirmation.get("expected_after_state"),
        risk_class=contract.side_effect_class,
        payload_hash=record.payload_hash,
        idempotency_fingerprint=fingerprint(idempotency_key, 16),
        required_approvals=record.required_approvals,
        approver_groups=list(contract.approval.get("approver_groups", []))[:1],
        compensation=confirmation.get("compensation") or "none declared",
        rejection_path=confirmation.get("rejection_path") or "the call ends with CONFIRMATION_MISSING; nothing runs",
        created_at_ms=now_ms,
        expires_at_ms=expires_at_ms,
        state_version=state_version,
    )


def expiry_for(record: StageRecord, contract: Contract, now_ms: int) -> int:
    """The contract's approval window, cut short by the proposal's own deadline."""
    expiry = now_ms + int(contract.approval.get("expiry_seconds", 600)) * 1000
    if record.deadline_ms is not None:
        expiry = min(expiry, record.deadline_ms)
    return expiry


def next_escalation_ms(contract: Contract, created_ms: int, expires_ms: int, level: int) -> int | None:
    """When the approval goes on to its next approver group, or None when no group is left.

    Each escalation comes after the contract's fraction of the time that was left: with 0.5
    and a ten-minute window, the second group is asked after five minutes, a third after
    seven and a half. Expiry still AUTO_DENIES; escalation only widens who may decide.
    """
    groups = contract.approval.get("approver_groups", [])
    if level + 1 >= len(groups):
        return None
    fraction = float(contract.approval.get("escalate_at_fraction", 0.5))
    return created_ms + round((expires_ms - created_ms) * (1 - (1 - fraction) ** (level + 1)))


def escalated(packet: ApprovalRequest, contract: Contract) -> ApprovalRequest:
    """The packet again, open to one more approver group."""
    groups = list(contract.approval.get("approver_groups", []))
    level = packet.escalation_level + 1
    return packet.model_copy(update={"escalation_level": level, "approver_groups": groups[: level + 1]})

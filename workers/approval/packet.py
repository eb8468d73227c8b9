"""The confirmation packet: what an approver is shown for a held call, until when, and when the
approval goes on to the next approver group.

Pure: the call, its contract, what was read of the target's state and the time come in.
`opening` is everything a new ticket holds; approval-wait writes it (tickets.py) and announces
its packet (resume.py).

The groups that decide are the policy's when its permits named some (the record's
`approver_groups`, written by the policy stage), else the contract's; either way the first is
asked first and each escalation opens the next (`approver_groups`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from toolgate.contracts.contract import Contract
from toolgate.contracts.templates import fill
from toolgate.schemas.hashing import fingerprint
from toolgate.schemas.models import ApprovalRequest, StageRecord
from toolgate.topics.headers import trace_id_of
from toolgate.workers.approval.decision import ticket_of
from toolgate.workers.runtime import target_state
from toolgate.workers.runtime.facts import Facts


def consequence_of(arguments: dict[str, Any], contract: Contract) -> str:
    """The contract's plain-language consequence with this call's arguments filled in."""
    confirmation = contract.binding.get("confirmation") or {}
    return fill(confirmation.get("consequence") or contract.document["affordance"]["model_description"], arguments)


def approver_groups(record: StageRecord, contract: Contract) -> list[str]:
    """The approver groups that decide a held call, in the order they are asked: those the
    policy's permits named for it, else its contract's (none: any approver allowed for the
    risk class)."""
    return list(record.approver_groups or contract.approval.get("approver_groups", []))


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
    """The packet an approver sees; it goes first to the first of the call's groups."""
    confirmation = contract.binding.get("confirmation") or {}
    action = confirmation.get("action") or contract.name
    consequence = consequence_of(record.call.arguments, contract)
    return ApprovalRequest(
        approval_id=approval_id,
        call_id=record.call.call_id,
        trace_id=trace_id_of(record.traceparent),
        tenant_id=record.call.tenant_id,
        run_id=record.call.run_id,
        requested_by=record.call.principal,
        tool_name=record.call.tool_name,
        tool_version=record.call.tool_version,
        action=action,
        consequence=consequence,
        arguments=record.call.arguments,
        before_state=before_state,
        expected_after_state=confirmation.get("expected_after_state"),
        risk_class=contract.side_effect_class,
        payload_hash=record.call.payload_hash,
        idempotency_fingerprint=fingerprint(idempotency_key, 16),
        required_approvals=record.required_approvals,
        approver_groups=approver_groups(record, contract)[:1],
        compensation=confirmation.get("compensation") or "none declared",
        rejection_path=confirmation.get("rejection_path") or "the call ends with CONFIRMATION_MISSING; nothing runs",
        created_at_ms=now_ms,
        expires_at_ms=expires_at_ms,
        state_version=state_version,
    )


def expiry_for(record: StageRecord, contract: Contract, now_ms: int) -> int:
    """The contract's approval window, cut short by the proposal's own deadline."""
    expiry = now_ms + int(contract.approval.get("expiry_seconds", 600)) * 1000
    if record.call.deadline_ms is not None:
        expiry = min(expiry, record.call.deadline_ms)
    return expiry


def next_escalation_ms(
    contract: Contract, groups: Sequence[str], created_ms: int, expires_ms: int, level: int
) -> int | None:
    """When the approval goes on to its next of `groups` (the call's, `approver_groups`), or
    None when no group is left.

    Each escalation comes after the contract's fraction of the time that was left: with 0.5
    and a ten-minute window, the second group is asked after five minutes, a third after
    seven and a half. Expiry still AUTO_DENIES; escalation only widens who may decide.
    """
    if level + 1 >= len(groups):
        return None
    fraction = float(contract.approval.get("escalate_at_fraction", 0.5))
    return created_ms + round((expires_ms - created_ms) * (1 - (1 - fraction) ** (level + 1)))


def escalated(packet: ApprovalRequest, groups: Sequence[str]) -> ApprovalRequest:
    """The packet again, open to one more of `groups` (the call's, `approver_groups`)."""
    level = packet.escalation_level + 1
    return packet.model_copy(update={"escalation_level": level, "approver_groups": list(groups[: level + 1])})


@dataclass(frozen=True)
class Opening:
    """A new ticket: the call as it is held, its packet, and when it first escalates."""

    request: StageRecord  # the call with its traceparent and approval_id, as it is stored
    packet: ApprovalRequest
    escalate_at_ms: int | None

    @property
    def approval_id(self) -> str:
        return self.packet.approval_id


def opening(
    record: StageRecord,
    traceparent: str,
    contract: Contract,
    found: Facts,
    now_ms: int,
) -> Opening:
    """The ticket for a call that needs approval, with the target's state as read (`found`)."""
    approval_id = ticket_of(record)
    expires = expiry_for(record, contract, now_ms)
    request = record.model_copy(update={"traceparent": traceparent, "approval_id": approval_id})
    shown = target_state.shown(target_state.current(record, contract, found))
    state_version = target_state.bound_version(record, contract, found)
    packet = confirmation_packet(
        request, contract, approval_id, record.call.idempotency_key, now_ms, expires, shown, state_version
    )
    groups = approver_groups(record, contract)
    return Opening(request, packet, next_escalation_ms(contract, groups, now_ms, expires, 0))

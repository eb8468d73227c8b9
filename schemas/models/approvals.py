"""The records of approvals: a request for one and a decision on it.
Generated from schemas/avro/ by codegen.py: do not edit."""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar

from pydantic import Field

from toolgate.schemas.models.common import Principal
from toolgate.schemas.wire import JsonObject, WireModel


class Verdict(StrEnum):
    APPROVE = "APPROVE"
    DENY = "DENY"


class ApprovalDecision(WireModel):
    """One approver's signed decision on a held call, on tool.approvals.decisions keyed by
    approval_id. Bound to the payload hash, tool and version (and, when named, the target's
    state and the call's trace); single use by decision_id; Ed25519 signature over the RFC
    8785 canonical JSON of every other field.
    """

    avro_name: ClassVar[str] = "toolgate.ApprovalDecision"
    decision_id: str
    approval_id: str
    decision: Verdict
    approver_id: str
    tool_name: str
    tool_version: str
    payload_hash: str
    reason: str | None = None
    decided_at_ms: int
    expires_at_ms: int
    state_version: str | None = None
    trace_id: str | None = None
    approval_scope: str | None = None
    edited_arguments: str | None = None
    signature: bytes


class ApprovalRequest(WireModel):
    """The confirmation packet for one held call, on tool.approvals.requested keyed by
    approval_id: the concrete arguments, what will happen, before and expected after state,
    risk class, idempotency fingerprint, expiry and what a rejection does.
    """

    avro_name: ClassVar[str] = "toolgate.ApprovalRequest"
    approval_id: str
    call_id: str
    trace_id: str
    tenant_id: str
    run_id: str
    requested_by: Principal
    tool_name: str
    tool_version: str
    action: str
    consequence: str
    arguments: JsonObject
    before_state: JsonObject | None = None
    expected_after_state: JsonObject | None = None
    risk_class: str
    payload_hash: str
    idempotency_fingerprint: str
    required_approvals: int
    approver_groups: list[str] = Field(default_factory=list)
    escalation_level: int = 0
    compensation: str
    rejection_path: str
    created_at_ms: int
    expires_at_ms: int
    state_version: str | None = None

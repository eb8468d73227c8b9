"""The records between stages: a call, a stage's decision, a batch, a result.
Generated from schemas/avro/ by codegen.py: do not edit."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from toolgate.schemas.models.common import FieldError, Outcome, Principal, Verification
from toolgate.schemas.wire import JsonObject, WireModel


class StageHeadCall(WireModel):
    """The fields of a Call that StageHead reads."""

    avro_name: ClassVar[str] = "toolgate.Call"
    call_id: str
    home_partition: int
    tenant_id: str
    tool_name: str
    tool_version: str
    dry_run: bool = False
    idempotency_key: str


class Call(StageHeadCall):
    """One call as validation admitted it: who asked, what, with which canonical arguments, and
    the facts derived from them once (payload hash, idempotency key, request hash). Written
    by validation, never changed after: every later stage reads it, and a stage that passes
    a call on copies its bytes (kept: the codec keeps a read Call's encoding and writes it
    again as it came).
    """

    avro_name: ClassVar[str] = "toolgate.Call"
    request_hash: str
    principal: Principal
    workflow_id: str
    run_id: str
    logical_operation_id: str
    payload_hash: str
    deadline_ms: int | None = None
    repair_attempt: int = 0
    created_at_ms: int
    compensation_of: str | None = None
    proposal_digest: str = ""
    arguments: JsonObject


class ExecutionResult(WireModel):
    """How one call ended, at whichever stage ended it: executed, replayed, or refused with a
    taxonomy class. Normalization turns it into the agent's Observation.
    """

    avro_name: ClassVar[str] = "toolgate.ExecutionResult"
    call_id: str
    traceparent: str
    home_partition: int
    tenant_id: str
    principal: Principal
    workflow_id: str
    run_id: str
    tool_name: str
    tool_version: str
    stage: str
    outcome: Outcome
    data: JsonObject | None = None
    errors: list[FieldError] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    idempotency_hit: bool = False
    attempt_number: int = 1
    verification: Verification
    approval_id: str | None = None
    created_at_ms: int
    completed_at_ms: int
    proposal_digest: str = ""


class StageBatch(WireModel):
    """The calls one stage handled from one source partition in one round. Each item is a
    single-object-encoded StageRecord (or ExecutionResult on tool.results), so one bad item
    never spoils the others.
    """

    avro_name: ClassVar[str] = "toolgate.StageBatch"
    stage: str
    source_partition: int
    items: list[bytes]
    produced_at_ms: int = 0
    first_produced_at_ms: int = 0


class StageDecision(WireModel):
    """What one stage decided about a call on its way through the pipeline."""

    avro_name: ClassVar[str] = "toolgate.StageDecision"
    stage: str
    outcome: str
    detail: str | None = None
    at_ms: int


class StageRecord(WireModel):
    """One call between stages: what each stage decided so far, and the call itself (last, as
    the bytes validation wrote). Carried single-object encoded inside a StageBatch.
    """

    avro_name: ClassVar[str] = "toolgate.StageRecord"
    traceparent: str
    required_approvals: int = 0
    approver_groups: list[str] = Field(default_factory=list)
    approval_id: str | None = None
    approvers: list[str] = Field(default_factory=list)
    attempt: int = 1
    warnings: list[str] = Field(default_factory=list)
    decisions: list[StageDecision] = Field(default_factory=list)
    call: Call


class StageHead(WireModel):
    """What forwarding a call reads of a StageRecord: its stage fields up to the approvals and
    the leading fields of its call, the arguments unread.
    """

    avro_name: ClassVar[str] = "toolgate.StageRecord"
    reads: ClassVar[frozenset[str]] = frozenset(
        {
            "approval_id",
            "call.call_id",
            "call.dry_run",
            "call.home_partition",
            "call.idempotency_key",
            "call.tenant_id",
            "call.tool_name",
            "call.tool_version",
            "required_approvals",
            "traceparent",
        }
    )
    traceparent: str
    required_approvals: int = 0
    approval_id: str | None = None
    call: StageHeadCall

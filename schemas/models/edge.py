"""The records agents write and read: a proposal and its observation.
Generated from schemas/avro/ by codegen.py: do not edit."""

from __future__ import annotations

from typing import ClassVar

from toolgate.schemas.models.common import Principal, TaxonomyClass, Verification
from toolgate.schemas.wire import JsonObject, WireModel


class ExecutionMetadata(WireModel):
    avro_name: ClassVar[str] = "toolgate.ExecutionMetadata"
    timestamp: str
    latency_ms: int
    idempotency_hit: bool
    trace_id: str
    attempt_number: int


class ToolIdentity(WireModel):
    avro_name: ClassVar[str] = "toolgate.ToolIdentity"
    name: str
    version: str
    call_id: str


class ObservationStatus(WireModel):
    avro_name: ClassVar[str] = "toolgate.ObservationStatus"
    code: int
    is_error: bool
    taxonomy_class: TaxonomyClass
    retryable: bool
    repairable: bool
    requires_approval: bool
    fail_closed: bool


class ObservationError(WireModel):
    avro_name: ClassVar[str] = "toolgate.ObservationError"
    field: str | None = None
    message: str
    code: str


class ResultPayload(WireModel):
    avro_name: ClassVar[str] = "toolgate.ResultPayload"
    data: JsonObject | None = None
    errors: list[ObservationError]
    warnings: list[str]


class Observation(WireModel):
    """What an agent gets back for one call, on tool.observations keyed by run_id. Its JSON
    form is exactly the reference observation.schema.json.
    """

    avro_name: ClassVar[str] = "toolgate.Observation"
    tool_identity: ToolIdentity
    execution_metadata: ExecutionMetadata
    status: ObservationStatus
    result_payload: ResultPayload
    verification: Verification


class ToolProposal(WireModel):
    """One tool call an agent proposes, on tool.proposals keyed by run_id. `arguments` is the
    model's raw text, so a parse failure is a typed outcome rather than a crash.
    """

    avro_name: ClassVar[str] = "toolgate.ToolProposal"
    call_id: str
    tenant_id: str
    principal: Principal
    workflow_id: str
    run_id: str
    logical_operation_id: str
    tool_name: str
    tool_version: str = "latest"
    arguments: str
    idempotency_key: str | None = None
    deadline_ms: int | None = None
    repair_attempt: int = 0
    dry_run: bool = False
    created_at_ms: int
    compensation_of: str | None = None
    key_id: str | None = None
    signature: bytes | None = None
    signature_proof: bytes | None = None
    edit: bytes | None = None

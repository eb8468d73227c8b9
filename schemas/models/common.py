"""The types the other families share: who asks, the taxonomy, an outcome.
Generated from schemas/avro/ by codegen.py: do not edit."""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar

from pydantic import Field

from toolgate.schemas.wire import JsonObject, WireModel


class Principal(WireModel):
    """Who is asking: the human user the agent acts for, the agent, and the scopes granted."""

    avro_name: ClassVar[str] = "toolgate.Principal"
    user_id: str
    agent_id: str
    scopes: list[str] = Field(default_factory=list)


class TaxonomyClass(StrEnum):
    """The seeds' error taxonomy; the class fixes what an agent may do next."""

    SUCCESS = "SUCCESS"
    PARTIAL_SUCCESS = "PARTIAL_SUCCESS"
    SYNTACTIC_PARSE_FAIL = "SYNTACTIC_PARSE_FAIL"
    STRUCTURAL_VIOLATION = "STRUCTURAL_VIOLATION"
    TYPE_MISMATCH = "TYPE_MISMATCH"
    OUT_OF_BOUNDS = "OUT_OF_BOUNDS"
    SEMANTIC_INVALIDITY = "SEMANTIC_INVALIDITY"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    POLICY_VIOLATION = "POLICY_VIOLATION"
    STALE_STATE = "STALE_STATE"
    CONFIRMATION_MISSING = "CONFIRMATION_MISSING"
    BUDGET_EXHAUSTED = "BUDGET_EXHAUSTED"
    RATE_LIMITED = "RATE_LIMITED"
    TIMEOUT = "TIMEOUT"
    IDEMPOTENCY_CONFLICT = "IDEMPOTENCY_CONFLICT"
    SIGNATURE_MISMATCH = "SIGNATURE_MISMATCH"
    DEPENDENCY_UNAVAILABLE = "DEPENDENCY_UNAVAILABLE"
    OBSERVATION_NORMALIZATION_FAIL = "OBSERVATION_NORMALIZATION_FAIL"
    COMPENSATION_REQUIRED = "COMPENSATION_REQUIRED"
    COMPENSATION_FAILED = "COMPENSATION_FAILED"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


class Outcome(WireModel):
    """The response vector of one call's outcome (seeds: taxonomy class plus what may happen
    next).
    """

    avro_name: ClassVar[str] = "toolgate.Outcome"
    taxonomy_class: TaxonomyClass
    code: int
    is_error: bool
    retryable: bool
    repairable: bool
    requires_approval: bool
    fail_closed: bool
    next_action: str
    retry_after_ms: int | None = None


class FieldError(WireModel):
    """One field-level finding of a gate: which field, what was expected, what came."""

    avro_name: ClassVar[str] = "toolgate.FieldError"
    field: str | None = None
    message: str
    code: str
    expected: str | None = None
    actual: str | None = None


class Verification(WireModel):
    """Post-action verification hints, as in the reference observation schema."""

    avro_name: ClassVar[str] = "toolgate.Verification"
    post_action_verification_required: bool = False
    target_state_reference: str | None = None
    expected_state: JsonObject | None = None
    delay_seconds: int = 0

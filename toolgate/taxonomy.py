"""The seeds' error taxonomy and the response vector each class carries.

Every outcome that leaves toolgate names one taxonomy class; the class fixes what the agent
may do next (repair, retry, wait for approval, stop). Stages may narrow a vector for one
outcome (a TIMEOUT of a non-idempotent tool is not retryable), never invent a class. The
classes themselves are the Avro enum `toolgate.TaxonomyClass`.
"""

from __future__ import annotations

from typing import NamedTuple

from toolgate.schemas.models import TaxonomyClass


class ResponseVector(NamedTuple):
    code: int
    repairable: bool
    retryable: bool
    requires_approval: bool
    fail_closed: bool
    next_action: str


T = TaxonomyClass
VECTORS: dict[TaxonomyClass, ResponseVector] = {
    T.SUCCESS: ResponseVector(200, False, False, False, False, "continue"),
    T.PARTIAL_SUCCESS: ResponseVector(207, False, False, False, False, "verify_partial_effects"),
    T.SYNTACTIC_PARSE_FAIL: ResponseVector(400, True, False, False, False, "repair_arguments"),
    T.STRUCTURAL_VIOLATION: ResponseVector(422, True, False, False, False, "repair_arguments"),
    T.TYPE_MISMATCH: ResponseVector(422, True, False, False, False, "repair_arguments"),
    T.OUT_OF_BOUNDS: ResponseVector(422, True, False, False, False, "repair_arguments"),
    T.SEMANTIC_INVALIDITY: ResponseVector(422, True, False, False, False, "replan_or_clarify"),
    T.PERMISSION_DENIED: ResponseVector(403, False, False, False, True, "stop"),
    T.POLICY_VIOLATION: ResponseVector(403, False, False, False, True, "stop_or_escalate"),
    T.STALE_STATE: ResponseVector(409, True, False, False, False, "refresh_state_and_replan"),
    T.CONFIRMATION_MISSING: ResponseVector(428, False, False, True, True, "await_approval"),
    T.BUDGET_EXHAUSTED: ResponseVector(429, False, False, False, True, "stop_or_request_budget"),
    T.RATE_LIMITED: ResponseVector(429, False, True, False, False, "retry_after_delay"),
    T.TIMEOUT: ResponseVector(504, False, True, False, False, "retry_with_same_key"),
    T.IDEMPOTENCY_CONFLICT: ResponseVector(409, False, True, False, False, "retry_after_delay"),
    T.SIGNATURE_MISMATCH: ResponseVector(422, False, False, False, True, "stop"),
    T.DEPENDENCY_UNAVAILABLE: ResponseVector(503, False, True, False, False, "retry_after_recovery"),
    T.OBSERVATION_NORMALIZATION_FAIL: ResponseVector(502, False, False, False, True, "escalate"),
    T.COMPENSATION_REQUIRED: ResponseVector(500, False, False, False, True, "compensate_or_escalate"),
    T.COMPENSATION_FAILED: ResponseVector(500, False, False, True, True, "escalate_to_operator"),
    T.UNKNOWN_ERROR: ResponseVector(500, False, False, False, True, "escalate"),
}

# The validation gates in the seeds' pipeline order: when one proposal fails several
# gates, the observation names the earliest.
GATE_ORDER: tuple[TaxonomyClass, ...] = (
    T.SYNTACTIC_PARSE_FAIL,
    T.STRUCTURAL_VIOLATION,
    T.TYPE_MISMATCH,
    T.OUT_OF_BOUNDS,
    T.SEMANTIC_INVALIDITY,
    T.PERMISSION_DENIED,
    T.POLICY_VIOLATION,
    T.STALE_STATE,
    T.CONFIRMATION_MISSING,
    T.BUDGET_EXHAUSTED,
    T.RATE_LIMITED,
)

# The error code of a call whose tool, declared READ_ONLY, tried to write (the seeds' alert
# MUTATION_CLASS_VIOLATION; the taxonomy has no class of that name: it is a POLICY_VIOLATION),
# and of a call refused while its tool version is quarantined for one.
MUTATION_CLASS_VIOLATION = "mutation_class_violation"
TOOL_QUARANTINED = "tool_quarantined"


def vector(taxonomy: TaxonomyClass) -> ResponseVector:
    return VECTORS[taxonomy]

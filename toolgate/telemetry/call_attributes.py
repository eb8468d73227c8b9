"""The attributes every stage's span of a call carries (workers/runtime/span_attributes.py makes
them; tests/unit/test_span_attributes.py holds the two together). A contract's
`observability.trace_attributes` may name only these: contracts/honoured.py refuses any other, since
no span would carry it."""

from __future__ import annotations

CALL_ATTRIBUTES = frozenset(
    {
        # the seeds' (AI-engineering chapter, "OpenTelemetry and Context Propagation")
        "gen_ai.operation.name",
        "tool.name",
        "tool.version",
        "tool.call_id",
        "tenant.id",
        "tool.idempotency_key_hash",
        "tool.approval_id",
        "tool.validation.status",
        "tool.error_code",
        "tool.retryable",
        "tool.repairable",
        "tool.side_effect_class",
        "trace.replayable",
        # toolgate's own
        "toolgate.stage",
        "toolgate.outcome",
        "tool.contract.version",
        "tool.auth_profile",
        "tool.timeout_class",
    }
)

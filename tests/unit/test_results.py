"""`result` and `outcome` build their models without validating them (workers/runtime/results.py):
whatever their typed arguments, validating the same values makes the same models."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.unit.factories import FAST, JSON_VALUES, TRACEPARENT, proposal, registry, stage_record
from toolgate.schemas.models import ExecutionResult, FieldError, Outcome, TaxonomyClass, Verification
from toolgate.workers.runtime.results import outcome, result

TEXT = st.text(max_size=10)
INT32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
OVERRIDES = st.fixed_dictionaries(
    {},
    optional={
        "retryable": st.booleans(),
        "repairable": st.booleans(),
        "fail_closed": st.booleans(),
        "requires_approval": st.booleans(),
        "next_action": TEXT,
        "retry_after_ms": st.none() | INT32,
        "code": INT32,
        "is_error": st.booleans(),
    },
)
OUTCOMES = st.builds(
    lambda taxonomy, overrides: outcome(taxonomy, **overrides), st.sampled_from(list(TaxonomyClass)), OVERRIDES
)
VERIFICATIONS = st.none() | st.builds(
    Verification,
    post_action_verification_required=st.booleans(),
    target_state_reference=st.none() | TEXT,
    expected_state=st.none() | st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=3),
    delay_seconds=INT32,
)


def _calls() -> st.SearchStrategy[Any]:
    contract = registry().resolve("invoice.create_draft", "latest")
    digest = "sha256:" + "1" * 64
    return st.sampled_from(
        [stage_record(contract).call, stage_record(contract, proposal_digest=digest).call, proposal(contract.name, {})]
    )


@FAST
@given(
    call=_calls(),
    result_outcome=OUTCOMES,
    data=st.none() | st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=5),
    errors=st.lists(st.builds(FieldError, field=st.none() | TEXT, code=TEXT, message=TEXT), max_size=3),
    warnings=st.lists(TEXT, max_size=3),
    verification=VERIFICATIONS,
    tool_version=st.none() | TEXT,
    approval_id=st.none() | TEXT,
    proposal_digest=st.none() | TEXT,
    hit=st.booleans(),
    attempt=INT32,
    now=st.integers(min_value=0, max_value=2**62),
)
def test_results_built_without_validation_are_what_validation_makes(
    call: Any,
    result_outcome: Outcome,
    data: dict[str, Any] | None,
    errors: list[FieldError],
    warnings: list[str],
    verification: Verification | None,
    tool_version: str | None,
    approval_id: str | None,
    proposal_digest: str | None,
    hit: bool,
    attempt: int,
    now: int,
) -> None:
    assert Outcome.model_validate(result_outcome.model_dump()) == result_outcome
    res = result(
        call,
        stage="execution",
        result_outcome=result_outcome,
        traceparent=TRACEPARENT,
        home_partition=3,
        now_ms=now,
        data=data,
        errors=errors,
        warnings=warnings,
        tool_version=tool_version,
        idempotency_hit=hit,
        attempt_number=attempt,
        verification=verification,
        approval_id=approval_id,
        proposal_digest=proposal_digest,
    )
    validated = ExecutionResult.model_validate(res.model_dump())
    assert validated == res
    assert validated.model_fields_set == res.model_fields_set
    if data is not None:  # the result holds its own copy, as a validated one would
        assert res.data == data and res.data is not data


def test_a_result_is_a_complete_wire_model() -> None:
    """Every field of the model is set, so the codec and `model_dump` see no gap."""
    res = result(
        proposal("invoice.fetch", {}),
        stage="validation",
        result_outcome=outcome(TaxonomyClass.STRUCTURAL_VIOLATION),
        traceparent=TRACEPARENT,
        home_partition=0,
        now_ms=1,
    )
    assert set(res.__dict__) == set(ExecutionResult.model_fields)
    assert res.verification == Verification() and res.data is not None  # the feedback object

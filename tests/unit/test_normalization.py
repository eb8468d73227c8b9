"""Normalization (workers/normalization/decision.py): results become reference observations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fastjsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from tests.unit.factories import FAST, JSON_VALUES, TRACEPARENT, registry, stage_record
from toolgate.contracts.error_contract import Judged
from toolgate.schemas.models import ExecutionResult, FieldError, Observation, TaxonomyClass, Verification
from toolgate.scrubber import Scrubber
from toolgate.taxonomy import vector
from toolgate.workers.normalization.decision import normalize, rfc3339
from toolgate.workers.runtime.results import outcome, reject, result

REFERENCE = Path(__file__).resolve().parents[2] / "schemas" / "reference" / "observation.schema.json"
VALIDATOR = Draft202012Validator(json.loads(REFERENCE.read_text()))
NOW = 1_700_000_000_250
SCRUB = Scrubber()  # what the handler passes in: toolgate.scrubber's SCRUBBER

GOOD_DATA: dict[str, dict[str, Any]] = {
    "invoice.fetch": {
        "invoice_id": "inv_acme0001",
        "customer_id": "cust_acme01",
        "status": "open",
        "currency": "USD",
        "amount_cents": 150000,
        "due_date": "2026-12-31",
    },
    "invoice.create_draft": {"invoice_id": "inv_x", "status": "draft", "currency": "USD", "amount_cents": 150000},
    "notify.send_email": {"message_id": "msg_1", "status": "sent"},
    "payment.charge_card": {"charge_id": "ch_1", "status": "succeeded", "amount_cents": 125000, "currency": "USD"},
}
BAD_DATA: dict[str, dict[str, Any]] = {
    "invoice.fetch": {"invoice_id": "inv_acme0001"},
    "invoice.create_draft": {"invoice_id": "inv_x", "status": "sent", "currency": "USD", "amount_cents": 1},
    "notify.send_email": {"message_id": 5, "status": "sent"},
    "payment.charge_card": {"charge_id": "ch_1", "status": "succeeded", "amount_cents": 1, "currency": "USD", "x": 1},
}


def reference_errors(observation: Observation) -> list[str]:
    return [e.message for e in VALIDATOR.iter_errors(observation.model_dump(mode="json"))]


def success(tool: str, data: dict[str, Any] | None, **kwargs: Any) -> ExecutionResult:
    record = stage_record(registry().resolve(tool, "latest"))
    return result(
        record.call,
        stage="execution",
        result_outcome=outcome(TaxonomyClass.SUCCESS),
        traceparent=TRACEPARENT,
        home_partition=0,
        now_ms=NOW,
        data=data,
        **kwargs,
    )


def failure(taxonomy: TaxonomyClass, errors: list[FieldError] | None = None, **kwargs: Any) -> ExecutionResult:
    record = stage_record(registry().resolve("payment.charge_card", "latest"))
    return reject(
        record.call,
        taxonomy,
        errors if errors is not None else [FieldError(field="amount_cents", code="c", message="m")],
        stage="policy",
        traceparent=TRACEPARENT,
        home_partition=1,
        now_ms=NOW,
        **kwargs,
    )


@pytest.mark.parametrize("tool", sorted(GOOD_DATA))
def test_success_matching_output_schema(tool: str) -> None:
    verification = Verification(
        post_action_verification_required=True,
        target_state_reference="x:1",
        expected_state={"status": "ok"},
        delay_seconds=2,
    )
    res = success(tool, GOOD_DATA[tool], verification=verification, warnings=["careful"], attempt_number=2)
    normalized = normalize(res, registry(), SCRUB)
    assert normalized.problem is None
    obs = normalized.observation
    assert reference_errors(obs) == []
    assert obs.status.taxonomy_class is TaxonomyClass.SUCCESS and not obs.status.is_error and obs.status.code == 200
    assert obs.result_payload.data == GOOD_DATA[tool]
    assert obs.result_payload.warnings == ["careful"]
    assert obs.verification == verification
    assert obs.tool_identity.name == tool and obs.tool_identity.call_id == res.call_id
    assert obs.execution_metadata.trace_id == "0123456789abcdef0123456789abcdef"
    assert obs.execution_metadata.latency_ms == NOW - res.created_at_ms
    assert obs.execution_metadata.attempt_number == 2
    assert obs.execution_metadata.timestamp == rfc3339(NOW) == "2023-11-14T22:13:20.250Z"


@pytest.mark.parametrize("tool", sorted(BAD_DATA))
@pytest.mark.parametrize("kind", ["violating", "missing"])
def test_success_violating_output_schema(tool: str, kind: str) -> None:
    res = success(tool, BAD_DATA[tool] if kind == "violating" else None)
    normalized = normalize(res, registry(), SCRUB)
    obs = normalized.observation
    assert normalized.problem and "output schema" in normalized.problem
    assert obs.status.taxonomy_class is TaxonomyClass.OBSERVATION_NORMALIZATION_FAIL
    assert obs.status.fail_closed is True and obs.status.is_error is True
    assert obs.status.code == vector(TaxonomyClass.OBSERVATION_NORMALIZATION_FAIL).code
    assert obs.result_payload.data is None
    assert [e.code for e in obs.result_payload.errors] == ["normalization_failed"]
    assert obs.verification == Verification()
    assert reference_errors(obs) == []


def test_dry_run_success_skips_output_schema() -> None:
    normalized = normalize(success("payment.charge_card", {"dry_run": True, "would": "charge"}), registry(), SCRUB)
    assert normalized.problem is None
    assert normalized.observation.status.taxonomy_class is TaxonomyClass.SUCCESS


def test_unknown_contract_version_is_not_checked() -> None:
    res = success("invoice.fetch", {"anything": 1}).model_copy(update={"tool_version": "9.9.9"})
    assert normalize(res, registry(), SCRUB).problem is None


@pytest.mark.parametrize("taxonomy", list(TaxonomyClass), ids=[t.value for t in TaxonomyClass])
def test_every_taxonomy_class_via_reject_validates(taxonomy: TaxonomyClass) -> None:
    res = failure(
        taxonomy,
        [
            FieldError(field="amount_cents", code="x", message="m", expected="e", actual="a"),
            FieldError(field=None, code="y", message="n"),
        ],
        warnings=["w"],
    )
    normalized = normalize(res, registry(), SCRUB)
    obs = normalized.observation
    assert reference_errors(obs) == []
    if taxonomy is TaxonomyClass.SUCCESS:  # a SUCCESS without data cannot satisfy the output schema
        assert obs.status.taxonomy_class is TaxonomyClass.OBSERVATION_NORMALIZATION_FAIL
        return
    assert normalized.problem is None
    v = vector(taxonomy)
    # as charge_card's error contract reads the class (its own cases: the test below)
    tool = registry().resolve("payment.charge_card", "latest").errors
    v = v._replace(**tool.judge(taxonomy, Judged(v.repairable, v.retryable, v.fail_closed, v.next_action))._asdict())
    assert obs.status.taxonomy_class is taxonomy
    assert obs.status.is_error is True
    assert (
        obs.status.code,
        obs.status.retryable,
        obs.status.repairable,
        obs.status.requires_approval,
        obs.status.fail_closed,
    ) == (v.code, v.retryable, v.repairable, v.requires_approval, v.fail_closed)
    assert [(e.field, e.code) for e in obs.result_payload.errors] == [("amount_cents", "x"), (None, "y")]
    feedback = obs.result_payload.data["feedback"]  # type: ignore[index]
    assert feedback["error_code"] == taxonomy.value and feedback["next_action"] == v.next_action


@pytest.mark.parametrize(
    ("taxonomy", "retryable", "fail_closed", "next_action"),
    [
        # charge_card lists TIMEOUT to escalate and fail closed, never to retry
        (TaxonomyClass.TIMEOUT, False, True, "escalate"),
        # ... and leaves IDEMPOTENCY_CONFLICT out of its retryable errors
        (TaxonomyClass.IDEMPOTENCY_CONFLICT, False, False, "retry_after_delay"),
        (TaxonomyClass.RATE_LIMITED, True, False, "retry_after_delay"),
        (TaxonomyClass.DEPENDENCY_UNAVAILABLE, True, False, "retry_after_recovery"),
        (TaxonomyClass.UNKNOWN_ERROR, False, True, "escalate"),
    ],
)
def test_an_error_is_judged_by_the_tools_error_contract(
    taxonomy: TaxonomyClass, retryable: bool, fail_closed: bool, next_action: str
) -> None:
    obs = normalize(failure(taxonomy), registry(), SCRUB).observation
    assert (obs.status.retryable, obs.status.fail_closed) == (retryable, fail_closed)
    feedback = obs.result_payload.data["feedback"]  # type: ignore[index]
    assert (feedback["retryable"], feedback["next_action"]) == (retryable, next_action)


def test_a_tool_whose_version_is_unknown_is_judged_by_the_taxonomy_alone() -> None:
    res = failure(TaxonomyClass.TIMEOUT).model_copy(update={"tool_version": "1.x"})
    obs = normalize(res, registry(), SCRUB).observation
    assert (obs.status.retryable, obs.status.fail_closed) == (True, False)


def test_rate_limited_retry_after_in_feedback() -> None:
    res = failure(TaxonomyClass.RATE_LIMITED, retry_after_ms=1234)
    obs = normalize(res, registry(), SCRUB).observation
    assert obs.result_payload.data["feedback"]["retry_after_ms"] == 1234  # type: ignore[index]


def test_latency_and_attempt_are_clamped() -> None:
    res = success("notify.send_email", GOOD_DATA["notify.send_email"], attempt_number=0)
    res = res.model_copy(update={"completed_at_ms": res.created_at_ms - 50})
    obs = normalize(res, registry(), SCRUB).observation
    assert obs.execution_metadata.latency_ms == 0 and obs.execution_metadata.attempt_number == 1
    assert reference_errors(obs) == []


def test_bad_traceparent_gives_empty_trace_id() -> None:
    res = success("notify.send_email", GOOD_DATA["notify.send_email"]).model_copy(update={"traceparent": "garbage"})
    obs = normalize(res, registry(), SCRUB).observation
    assert obs.execution_metadata.trace_id == "" and reference_errors(obs) == []


FORMATS = fastjsonschema.compile(json.loads(REFERENCE.read_text()))  # checks "date-time" too
LAST_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z, the last instant RFC 3339 writes
TEXT = st.text(max_size=10)
FIELD_ERRORS = st.lists(
    st.builds(FieldError, field=st.none() | TEXT, code=TEXT, message=TEXT, expected=st.none() | TEXT), max_size=3
)
VERIFICATIONS = st.builds(
    Verification,
    post_action_verification_required=st.booleans(),
    target_state_reference=st.none() | TEXT,
    expected_state=st.none() | st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=3),
    delay_seconds=st.integers(min_value=0, max_value=2**31 - 1),
)


@FAST
@given(
    data=st.none() | st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=5),
    taxonomy=st.sampled_from(list(TaxonomyClass)),
    tool=st.sampled_from(sorted(GOOD_DATA)),
    errors=FIELD_ERRORS,
    warnings=st.lists(TEXT, max_size=3),
    verification=VERIFICATIONS,
    created=st.integers(min_value=0, max_value=LAST_MS),
    completed=st.integers(min_value=0, max_value=LAST_MS),
    attempt=st.integers(min_value=-(2**31), max_value=2**31 - 1),
    hit=st.booleans(),
    traceparent=st.just(TRACEPARENT) | TEXT,
)
def test_every_observation_normalize_builds_satisfies_the_reference_schema(
    data: dict[str, Any] | None,
    taxonomy: TaxonomyClass,
    tool: str,
    errors: list[FieldError],
    warnings: list[str],
    verification: Verification,
    created: int,
    completed: int,
    attempt: int,
    hit: bool,
    traceparent: str,
) -> None:
    """What stands in for a run-time check of every observation against the reference schema
    (normalization no longer pays for one per call), and for validating the observation's models
    as they are built: whatever an ExecutionResult holds within its model, the observation built
    from it is what validation would make of it, and satisfies the schema, formats included."""
    res = result(
        stage_record(registry().resolve(tool, "latest")).call,
        stage="execution",
        result_outcome=outcome(taxonomy),
        traceparent=traceparent,
        home_partition=0,
        now_ms=completed,
        data=data,
        errors=errors,
        warnings=warnings,
        idempotency_hit=hit,
        attempt_number=attempt,
        verification=verification,
    ).model_copy(update={"created_at_ms": created})
    normalized = normalize(res, registry(), SCRUB)
    # Built without validation (decision.build): validating the same values gives the same model.
    assert Observation.model_validate(normalized.observation.model_dump()) == normalized.observation
    assert reference_errors(normalized.observation) == []
    FORMATS(normalized.observation.model_dump(mode="json"))
    if normalized.problem is not None:
        assert normalized.observation.status.fail_closed and normalized.observation.result_payload.data is None


def test_a_negative_verification_delay_fails_closed() -> None:
    """The one reference constraint the models do not hold (delay_seconds >= 0)."""
    res = success("invoice.fetch", GOOD_DATA["invoice.fetch"], verification=Verification(delay_seconds=-1))
    normalized = normalize(res, registry(), SCRUB)
    assert normalized.problem is not None and "delay_seconds" in normalized.problem
    assert normalized.observation.status.taxonomy_class is TaxonomyClass.OBSERVATION_NORMALIZATION_FAIL
    assert normalized.observation.verification.delay_seconds == 0 and reference_errors(normalized.observation) == []


# --- secrets ------------------------------------------------------------------------------

CANARY = "canary-secret-123-normalization-unit"
SCRUB.register(CANARY)


def _leaks(obs: Observation) -> bool:
    return CANARY in json.dumps(obs.model_dump(mode="json"), ensure_ascii=False)


def test_secret_in_success_data_is_scrubbed() -> None:
    data = {**GOOD_DATA["invoice.fetch"], "customer_id": f"cust with {CANARY} inside"}
    res = success("invoice.fetch", data, warnings=[f"token {CANARY}"])
    normalized = normalize(res, registry(), SCRUB)
    assert normalized.problem is None
    assert not _leaks(normalized.observation)
    assert "[REDACTED]" in normalized.observation.result_payload.data["customer_id"]  # type: ignore[index]


def test_secret_in_error_messages_and_feedback_is_scrubbed() -> None:
    errors = [
        FieldError(
            field="amount_cents", code="c", message=f"provider said {CANARY}", expected=CANARY, actual=f"x{CANARY}x"
        )
    ]
    res = failure(TaxonomyClass.DEPENDENCY_UNAVAILABLE, errors)
    assert CANARY in json.dumps(res.model_dump(mode="json"))  # the raw result carries it
    obs = normalize(res, registry(), SCRUB).observation
    assert not _leaks(obs)
    assert reference_errors(obs) == []


def test_secret_in_nested_data_keys_and_lists_is_scrubbed() -> None:
    res = failure(TaxonomyClass.UNKNOWN_ERROR).model_copy(update={"data": {CANARY: [CANARY, {"k": CANARY}]}})
    assert not _leaks(normalize(res, registry(), SCRUB).observation)


def test_secret_in_error_field_is_scrubbed() -> None:
    res = failure(TaxonomyClass.STRUCTURAL_VIOLATION, [FieldError(field=CANARY, code="unexpected_field", message="m")])
    assert not _leaks(normalize(res, registry(), SCRUB).observation)


def test_only_the_scrubber_passed_in_scrubs() -> None:
    data = {**GOOD_DATA["invoice.fetch"], "customer_id": f"cust with {CANARY} inside"}
    assert _leaks(normalize(success("invoice.fetch", data), registry(), Scrubber()).observation)


def _in_parts(tool: str, taxonomy: TaxonomyClass, data: dict[str, Any]) -> ExecutionResult:
    record = stage_record(registry().resolve(tool, "latest"), {"title": "t", "body": "b"})
    return result(
        record.call,
        stage="execution",
        result_outcome=outcome(taxonomy),
        traceparent=TRACEPARENT,
        home_partition=0,
        now_ms=NOW,
        data=data,
    )


SENT = {"index": 0, "to": "a@x.example", "ok": True, "message_id": "m"}
BOUNCED = {"index": 1, "to": "b@x.example", "ok": False, "error": {"code": "c", "message": "m"}}
STEPS = {"post_id": "post_1", "steps": [{"step": "post", "ok": True}, {"step": "notify", "ok": False}]}


@pytest.mark.parametrize(
    ("tool", "taxonomy", "data", "problem"),
    [
        ("notify.send_bulk", TaxonomyClass.PARTIAL_SUCCESS, {"results": [SENT, BOUNCED]}, False),
        ("notify.send_bulk", TaxonomyClass.PARTIAL_SUCCESS, {"results": [SENT, {**BOUNCED, "leak": "x"}]}, True),
        ("notify.send_bulk", TaxonomyClass.PARTIAL_SUCCESS, {"withheld": {"reason": "result_too_large"}}, False),
        (
            "notify.publish_announcement",
            TaxonomyClass.COMPENSATION_REQUIRED,
            {**STEPS, "compensation": {"tool": "notify.retract_announcement", "arguments": {}}},
            False,
        ),
        ("notify.publish_announcement", TaxonomyClass.COMPENSATION_REQUIRED, {**STEPS, "debug": "x"}, True),
    ],
    ids=["partial", "partial-leaking", "partial-withheld", "compensation-required", "compensation-required-leaking"],
)
def test_a_partly_done_effect_in_parts_is_checked_against_the_output_schema(
    tool: str, taxonomy: TaxonomyClass, data: dict[str, Any], problem: bool
) -> None:
    normalized = normalize(_in_parts(tool, taxonomy, data), registry(), SCRUB)
    assert bool(normalized.problem) is problem
    expected = TaxonomyClass.OBSERVATION_NORMALIZATION_FAIL if problem else taxonomy
    assert normalized.observation.status.taxonomy_class is expected
    assert reference_errors(normalized.observation) == []

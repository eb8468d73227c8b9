"""What a call's metrics and spans say about it (workers/runtime/call_facts.py and
workers/validation/tally.py): interim or final, retries, compensations, replayable, trace
complete, and validation's verdicts. Pure: table-driven, no telemetry."""

from __future__ import annotations

from typing import Any

import pytest

from toolgate.schemas.models import ExecutionResult, FieldError, StageRecord, TaxonomyClass
from toolgate.workers.runtime import call_facts
from toolgate.workers.runtime.call_facts import GateFacts
from toolgate.workers.runtime.results import outcome, result
from toolgate.workers.validation.decision import Pass, Reject
from toolgate.workers.validation.tally import tally

from .factories import TRACEPARENT, proposal, registry, stage_record

T = TaxonomyClass
HELD = outcome(T.CONFIRMATION_MISSING, code=202, is_error=False, fail_closed=False)
UNVERIFIED = outcome(T.TIMEOUT, code=202, retryable=False, fail_closed=False, next_action="await_verification")


def record(tool: str = "invoice.create_draft", **overrides: Any) -> StageRecord:
    return stage_record(registry().resolve(tool, "1.x"), **overrides)


def ended(taxonomy: T | None = None, *, tool: str = "invoice.create_draft", **kwargs: Any) -> ExecutionResult:
    stage = kwargs.pop("stage", "execution")
    result_outcome = kwargs.pop("result_outcome", None) or outcome(taxonomy or T.SUCCESS)
    traceparent = kwargs.pop("traceparent", TRACEPARENT)
    call = record(tool).call
    return result(
        call,
        stage=stage,
        result_outcome=result_outcome,
        traceparent=traceparent,
        home_partition=0,
        now_ms=1,
        proposal_digest=kwargs.pop("proposal_digest", "d" * 64),
        **kwargs,
    )


@pytest.mark.parametrize(
    ("res", "kind"),
    [
        (ended(result_outcome=HELD), "approval_pending"),
        (ended(result_outcome=UNVERIFIED), "outcome_unverified"),
        (ended(T.SUCCESS), None),
        (ended(T.TIMEOUT), None),  # a deadline that passed: a final TIMEOUT
        (ended(T.CONFIRMATION_MISSING, stage="approval-wait"), None),  # denied: final
    ],
)
def test_an_interim_observation_is_known_by_its_202(res: ExecutionResult, kind: str | None) -> None:
    assert call_facts.interim_kind(res) == kind


@pytest.mark.parametrize(
    ("res", "fact"),
    [
        (ended(T.SUCCESS), None),  # a first attempt
        (ended(T.SUCCESS, attempt_number=2), "succeeded"),
        (ended(T.DEPENDENCY_UNAVAILABLE, attempt_number=3), "failed"),
        (ended(T.SUCCESS, attempt_number=2, idempotency_hit=True), None),  # a replay runs nothing
        (ended(T.IDEMPOTENCY_CONFLICT), "blocked"),  # its operation is in flight: not run again
        (ended(T.TYPE_MISMATCH, attempt_number=2, stage="validation"), None),
    ],
)
def test_what_a_final_result_says_of_retries(res: ExecutionResult, fact: str | None) -> None:
    assert call_facts.retry_of(res) == fact


def test_a_compensation_ends_succeeded_failed_or_unverified_and_a_refused_one_is_no_attempt() -> None:
    undo = record("invoice.void_draft", compensation_of="call_0")
    assert call_facts.compensation_of(undo, ended(T.SUCCESS, tool="invoice.void_draft")) == "succeeded"
    assert call_facts.compensation_of(undo, ended(T.COMPENSATION_FAILED, tool="invoice.void_draft")) == "failed"
    assert call_facts.compensation_of(undo, ended(result_outcome=UNVERIFIED, tool="invoice.void_draft")) == "unverified"
    assert call_facts.compensation_of(undo, ended(T.STALE_STATE, tool="invoice.void_draft")) is None
    replayed = ended(T.SUCCESS, tool="invoice.void_draft", idempotency_hit=True)
    assert call_facts.compensation_of(undo, replayed) is None
    assert call_facts.compensation_of(undo, None) is None  # held: nothing ended
    assert call_facts.compensation_of(record("invoice.void_draft"), ended(T.SUCCESS)) is None


SPAN = {
    "tool.call_id": "call_1",
    "tenant.id": "acme",
    "tool.contract.version": "1.0.0",
    "tool.side_effect_class": "LOW_RISK_WRITE",
    "tool.idempotency_key_hash": "ab" * 16,
}


@pytest.mark.parametrize(
    ("stage", "label", "model", "span", "expected"),
    [
        ("validation", "forwarded", proposal("invoice.create_draft", "{}"), SPAN, True),
        ("validation", "TYPE_MISMATCH", proposal("invoice.create_draft", "{}"), SPAN, True),
        ("validation", "held", proposal("invoice.create_draft", "{}"), SPAN, False),  # proved no one
        ("validation", "dead_lettered", proposal("invoice.create_draft", "{}"), SPAN, False),
        # a mutation passed on without its key
        ("validation", "forwarded", proposal("x", "{}"), {**SPAN, "tool.idempotency_key_hash": ""}, False),
        # named no registered contract
        ("validation", "STRUCTURAL_VIOLATION", proposal("no.such", "{}"), {**SPAN, "tool.contract.version": ""}, False),
        ("policy", "forwarded", record(), SPAN, True),
        ("execution", "SUCCESS", record(required_approvals=1), SPAN, False),  # ran under no approval
        ("execution", "SUCCESS", record(required_approvals=1, approval_id="apr_1"), SPAN, True),
        ("approval-wait", "held", record(required_approvals=1), SPAN, True),
        ("normalization", "SUCCESS", ended(T.SUCCESS), {**SPAN, "tool.idempotency_key_hash": ""}, True),
        ("normalization", "SUCCESS", ended(T.SUCCESS, proposal_digest=""), SPAN, False),
        ("policy", "forwarded", record(), {**SPAN, "tenant.id": ""}, False),
    ],
)
def test_replayable_means_the_replay_fields_were_captured(
    stage: str, label: str, model: object, span: dict[str, str], expected: bool
) -> None:
    assert call_facts.replayable(stage, label, model, span) is expected


@pytest.mark.parametrize(
    ("traceparent", "expected"),
    [
        (TRACEPARENT, True),
        (TRACEPARENT[:-2] + "00", False),  # not sampled: no stage recorded a span
        ("00-" + "0" * 32 + "-0123456789abcdef-01", False),
        ("", False),
        ("garbage", False),
    ],
)
def test_a_trace_is_complete_when_sampled_and_replayable(traceparent: str, expected: bool) -> None:
    assert call_facts.trace_complete(ended(T.SUCCESS, traceparent=traceparent), contract_known=True) is expected


def test_an_incomplete_trace_names_no_contract_or_no_proposal() -> None:
    assert not call_facts.trace_complete(ended(T.SUCCESS), contract_known=False)
    assert not call_facts.trace_complete(ended(T.SUCCESS, proposal_digest=""), contract_known=True)


CONTRACT = registry().resolve("invoice.create_draft", "1.x")
PASSED = Pass(CONTRACT, {}, "sha256:" + "0" * 64)
TYPED = Reject(T.TYPE_MISMATCH, (FieldError(field="amount", code="type", message="not a number"),), "1.0.0")
SEMANTIC = Reject(T.SEMANTIC_INVALIDITY, (), "1.0.0")
EXHAUSTED = Reject(T.BUDGET_EXHAUSTED, (), "1.0.0")


@pytest.mark.parametrize(
    ("repair_attempt", "gated", "final", "facts"),
    [
        (0, PASSED, PASSED, GateFacts("first", "valid", "valid")),
        (1, PASSED, PASSED, GateFacts("repair", "valid", "valid", ("repaired",))),
        (0, TYPED, TYPED, GateFacts("first", "invalid", "unchecked", ("triggered",))),
        (0, SEMANTIC, SEMANTIC, GateFacts("first", "valid", "invalid", ("triggered",))),
        (2, TYPED, TYPED, GateFacts("repair", "invalid", "unchecked")),
        (2, SEMANTIC, EXHAUSTED, GateFacts("repair", "valid", "invalid", ("exhausted",))),
        # the run's repair budget was spent: the loop ended as it began
        (0, TYPED, EXHAUSTED, GateFacts("first", "invalid", "unchecked", ("triggered", "exhausted"))),
    ],
)
def test_what_validation_counts_of_a_proposal(repair_attempt: int, gated: Any, final: Any, facts: GateFacts) -> None:
    assert tally(proposal("invoice.create_draft", "{}", repair_attempt=repair_attempt), gated, final) == facts

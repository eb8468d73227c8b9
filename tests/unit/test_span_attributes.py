"""The seeds' span attributes of a call at each stage (workers/runtime/span_attributes.py)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest

from toolgate.schemas.models import TaxonomyClass
from toolgate.telemetry.call_attributes import CALL_ATTRIBUTES
from toolgate.workers.runtime import span_attributes
from toolgate.workers.runtime.results import reject

from .factories import proposal, registry, stage_record

SEEDS = (
    "gen_ai.operation.name",
    "tool.name",
    "tool.version",
    "tool.call_id",
    "tool.side_effect_class",
    "tool.idempotency_key_hash",
    "tool.approval_id",
    "tenant.id",
    "trace.replayable",
)


@pytest.fixture(autouse=True)
def contracts() -> Iterator[None]:
    span_attributes.use_registry(registry())
    yield
    span_attributes.CONTRACTS.registry = None


def test_a_proposal_names_its_resolved_contract_and_hashes_its_key() -> None:
    model = proposal("notify.send_email", "{}", tool_version="1.x", idempotency_key="k-123")
    opened = span_attributes.opened("validation", model, model.call_id)
    assert set(SEEDS) <= set(opened)
    assert opened["tool.version"] == opened["tool.contract.version"] == "1.0.0"
    assert (opened["tool.side_effect_class"], opened["tool.auth_profile"]) == ("HIGH_RISK_EXTERNAL", "bearer")
    assert (
        opened["tool.idempotency_key_hash"] == hashlib.sha256(f"{model.tenant_id}\x00k-123".encode()).hexdigest()[:32]
    )
    assert "k-123" not in str(opened.values())


def test_an_unknown_tool_keeps_its_spec_and_empty_contract_facts() -> None:
    opened = span_attributes.opened("validation", proposal("no.such_tool", "{}", tool_version="2.x"), "c1")
    assert opened["tool.version"] == "2.x" and opened["tool.side_effect_class"] == opened["tool.auth_profile"] == ""
    assert opened["tool.idempotency_key_hash"] == ""  # no key, no hash


def test_tool_names_the_registry_does_not_know_are_not_kept() -> None:
    """A signed proposal may name any tool: the lookups of names no contract has are not
    cached, or a caller inventing names would grow every stage's memory without end."""
    contracts = span_attributes.Contracts()
    contracts.use(registry())
    for n in range(1_000):
        assert contracts.of(f"made.up_{n}", "1.0.0") is None
    assert contracts.of("notify.send_email", "1.x") is contracts.of("notify.send_email", "1.x") is not None
    assert len(contracts._found) == 1


@pytest.mark.parametrize(
    ("stage", "label", "status", "code", "retryable", "repairable"),
    [
        ("validation", "forwarded", "passed", "", False, False),
        ("validation", "TYPE_MISMATCH", "failed", "TYPE_MISMATCH", False, True),
        ("validation", "dead_lettered", "failed", "dead_lettered", False, False),
        ("policy", "forwarded", "passed", "", False, False),
        ("policy", "RATE_LIMITED", "blocked", "RATE_LIMITED", True, False),
        ("approval-wait", "CONFIRMATION_MISSING", "approval_pending", "", False, False),
        ("approval-wait", "held", "approval_pending", "", False, False),
        ("execution", "SUCCESS", "passed", "", False, False),
        ("execution", "TIMEOUT", "blocked", "TIMEOUT", True, False),
    ],
)
def test_how_a_stage_left_a_call(
    stage: str, label: str, status: str, code: str, retryable: bool, repairable: bool
) -> None:
    record = stage_record(registry().resolve("invoice.fetch", "1.0.0"))
    closed = span_attributes.closed(stage, label, record)
    assert (closed["tool.validation.status"], closed["tool.error_code"]) == (status, code)
    assert (closed["tool.retryable"], closed["tool.repairable"]) == (retryable, repairable)
    assert closed["toolgate.outcome"] == label


def test_a_result_at_normalization_is_judged_by_the_stage_that_produced_it() -> None:
    record = stage_record(registry().resolve("invoice.fetch", "1.0.0"))
    result = reject(
        record.call, TaxonomyClass.OUT_OF_BOUNDS, [], stage="validation", traceparent="", home_partition=0, now_ms=1
    )
    closed = span_attributes.closed("normalization", "OUT_OF_BOUNDS", result)
    assert (closed["tool.validation.status"], closed["tool.error_code"]) == ("failed", "OUT_OF_BOUNDS")
    assert closed["tool.repairable"] is True


def test_every_call_span_carries_exactly_the_attributes_a_contract_may_name() -> None:
    """A contract's `observability.trace_attributes` is checked against CALL_ATTRIBUTES at
    admission: that set must be what the spans carry, no more and no less."""
    model = proposal("notify.send_email", "{}", tool_version="1.x", idempotency_key="k-123")
    carried = span_attributes.opened("validation", model, model.call_id) | span_attributes.closed(
        "validation", "forwarded", model
    )
    assert set(carried) == CALL_ATTRIBUTES


def test_a_call_that_named_no_key_has_the_hash_of_the_key_validation_derived() -> None:
    """The span of validation opens before the key is derived: it ends with its hash, and the
    call is replayable only then (a mutation needs its key)."""
    model = proposal("invoice.create_draft", "{}", tool_version="1.x")
    began = span_attributes.opened("validation", model, model.call_id)
    assert began["tool.idempotency_key_hash"] == "" and began["trace.replayable"] is False
    ended = span_attributes.closed("validation", "forwarded", model, began, "derived-key")
    assert ended["tool.idempotency_key_hash"] == hashlib.sha256(b"acme\x00derived-key").hexdigest()[:32]
    assert ended["trace.replayable"] is True
    assert span_attributes.closed("validation", "forwarded", model, began)["trace.replayable"] is False


def test_a_proposal_naming_no_contract_is_not_replayable() -> None:
    model = proposal("no.such_tool", "{}")
    began = span_attributes.opened("validation", model, model.call_id)
    assert span_attributes.closed("validation", "STRUCTURAL_VIOLATION", model, began)["trace.replayable"] is False


def test_a_record_at_execution_that_needed_approval_is_replayable_with_its_approval() -> None:
    contract = registry().resolve("notify.send_email", "1.0.0")
    held = stage_record(contract, required_approvals=1)
    approved = stage_record(contract, required_approvals=1, approval_id="apr_1")
    for model, replayable in ((held, False), (approved, True)):
        began = span_attributes.opened("execution", model, model.call.call_id)
        assert span_attributes.closed("execution", "SUCCESS", model, began)["trace.replayable"] is replayable

"""Every class of the seeds' error taxonomy has a producer through the pipeline (issue 50, part 5).

The classes are the seeds' own: the enum of the reference observation schema. Each has a producer
here: proposals through one real `toolgate up` (the session's), answered with an observation of
that class, checked against the reference schema. A class without a producer fails, named; a
class the pipeline stopped producing fails, named, with what came instead.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from toolgate.taxonomy import VECTORS

from ..conftest import OBSERVATION_SCHEMA, REFERENCE, Pipeline
from .compensations import compensate
from .test_taxonomy_classes import BOUNCING, EMAIL, MESSAGES, NOTICE, Faults, approved, taxonomy

pytestmark = pytest.mark.timeout(180)

SEEDS_CLASSES: list[str] = json.loads(REFERENCE.read_text())["properties"]["status"]["properties"]["taxonomy_class"][
    "enum"
]
FETCH = "invoice.fetch"
DRAFT = {
    "customer_id": "cust_acme01",
    "currency": "USD",
    "due_date": "2030-12-31",
    "lines": [{"description": "coverage", "quantity": 1, "unit_amount_cents": 100}],
}

Producer = Callable[[Pipeline], dict[str, Any]]


def _held_email(pipeline: Pipeline, **faults: Any) -> dict[str, Any]:
    """An approved email, the provider behaving as `faults` say."""
    with Faults(pipeline, **faults):
        return approved(pipeline, "notify.send_email", EMAIL, idempotency_key=f"cov-{uuid.uuid4().hex}")[1]


def _denied_email(pipeline: Pipeline) -> dict[str, Any]:
    sent = pipeline.propose("notify.send_email", EMAIL)
    interim = pipeline.wait(sent, final=False)
    approval_id = str(interim["result_payload"]["data"]["approval"]["approval_id"])
    assert pipeline.cli("approvals", "deny", approval_id, "--as", "carol").returncode == 0
    return pipeline.wait(sent)


def _repeated_invalid(pipeline: Pipeline) -> dict[str, Any]:
    run_id, operation = f"run_{uuid.uuid4().hex[:10]}", f"op_{uuid.uuid4().hex[:10]}"
    pipeline.call(FETCH, {"invoice_id": 42}, run_id=run_id, logical_operation_id=operation)
    return pipeline.call(FETCH, {"invoice_id": 42}, run_id=run_id, logical_operation_id=operation, repair_attempt=1)


def _other_effects_compensation(pipeline: Pipeline) -> dict[str, Any]:
    first = pipeline.call("invoice.create_draft", DRAFT)
    other = pipeline.call("invoice.create_draft", {**DRAFT, "memo": "the other one"})
    invoice_id = other["result_payload"]["data"]["invoice_id"]
    return pipeline.call(
        "invoice.void_draft", {"invoice_id": invoice_id}, compensation_of=first["tool_identity"]["call_id"]
    )


def _key_reused(pipeline: Pipeline) -> dict[str, Any]:
    key = f"cov-{uuid.uuid4().hex}"
    pipeline.call("invoice.create_draft", DRAFT, idempotency_key=key)
    return pipeline.call("invoice.create_draft", {**DRAFT, "currency": "EUR"}, idempotency_key=key)


def _bulk_with_a_bounce(pipeline: Pipeline) -> dict[str, Any]:
    with Faults(pipeline, bounce=[BOUNCING]):
        key = f"cov-{uuid.uuid4().hex}"
        return approved(pipeline, "notify.send_bulk", {"messages": MESSAGES}, idempotency_key=key)[1]


def _announcement_half_done(pipeline: Pipeline) -> dict[str, Any]:
    with Faults(pipeline, fail_notify=True):
        return pipeline.call("notify.publish_announcement", NOTICE)


def _compensation_that_fails(pipeline: Pipeline) -> dict[str, Any]:
    sent = pipeline.propose("invoice.create_draft", DRAFT)
    invoice_id = pipeline.wait(sent)["result_payload"]["data"]["invoice_id"]
    pipeline.sql("UPDATE demo.invoices SET status = 'open' WHERE invoice_id = %s", (invoice_id,))  # finalized meanwhile
    observation: dict[str, Any] = compensate(pipeline, sent.call_id)["observation"]
    return observation


def _unverifiable(pipeline: Pipeline) -> dict[str, Any]:
    """The provider answers after the call's deadline and its status query is down."""
    with Faults(pipeline, delay_before_ms=7000, status_query_status=503):
        sent = pipeline.propose("notify.send_email", EMAIL, idempotency_key=f"cov-{uuid.uuid4().hex}")
        interim = pipeline.wait(sent, final=False)
        approval_id = str(interim["result_payload"]["data"]["approval"]["approval_id"])
        assert pipeline.cli("approvals", "approve", approval_id, "--as", "carol").returncode == 0
        return pipeline.wait(sent, timeout=90, resend=False)


PRODUCERS: dict[str, Producer] = {
    "SUCCESS": lambda p: p.call(FETCH, {"invoice_id": "inv_acme0001"}),
    "PARTIAL_SUCCESS": _bulk_with_a_bounce,
    "SYNTACTIC_PARSE_FAIL": lambda p: p.call(FETCH, '{"invoice_id": "inv_acme0001"'),
    "STRUCTURAL_VIOLATION": lambda p: p.call(FETCH, "{}"),
    "TYPE_MISMATCH": lambda p: p.call(FETCH, '{"invoice_id": 42}'),
    "OUT_OF_BOUNDS": lambda p: p.call(FETCH, '{"invoice_id": "INV-1"}'),
    "SEMANTIC_INVALIDITY": lambda p: p.call("invoice.create_draft", {**DRAFT, "due_date": "2020-01-31"}),
    "PERMISSION_DENIED": lambda p: p.call(FETCH, {"invoice_id": "inv_acme0001"}, scopes=["notify:send"]),
    "POLICY_VIOLATION": _other_effects_compensation,
    "STALE_STATE": lambda p: p.call(FETCH, {"invoice_id": "inv_globex0001"}),
    "CONFIRMATION_MISSING": _denied_email,
    "BUDGET_EXHAUSTED": _repeated_invalid,
    "RATE_LIMITED": lambda p: _held_email(p, fail_statuses=[429] * 3, retry_after_s=1),
    "TIMEOUT": lambda p: p.call(FETCH, {"invoice_id": "inv_acme0001"}, deadline_ms=int(time.time() * 1000) - 1000),
    "IDEMPOTENCY_CONFLICT": lambda p: _held_email(p, fail_statuses=[409] * 3),
    "SIGNATURE_MISMATCH": _key_reused,
    "DEPENDENCY_UNAVAILABLE": lambda p: _held_email(p, fail_statuses=[503] * 3, retry_after_s=1),
    "OBSERVATION_NORMALIZATION_FAIL": lambda p: _held_email(p, echo_credentials=True),
    "COMPENSATION_REQUIRED": _announcement_half_done,
    "COMPENSATION_FAILED": _compensation_that_fails,
    "UNKNOWN_ERROR": _unverifiable,
}


def test_the_taxonomy_is_the_seeds() -> None:
    assert [c.value for c in VECTORS] == SEEDS_CLASSES
    assert sorted(set(PRODUCERS) - set(SEEDS_CLASSES)) == [], "a producer of a class the seeds do not have"


@pytest.mark.parametrize("taxonomy_class", SEEDS_CLASSES)
def test_every_class_has_a_producer_through_the_pipeline(pipeline: Pipeline, taxonomy_class: str) -> None:
    producer = PRODUCERS.get(taxonomy_class)
    if producer is None:
        pytest.fail(f"{taxonomy_class} has no end-to-end producer")
    observation = producer(pipeline)
    errors = sorted(OBSERVATION_SCHEMA.iter_errors(observation), key=str)
    assert not errors, f"{taxonomy_class}'s observation violates the reference schema: {errors[0]}"
    assert taxonomy(observation) == taxonomy_class, (
        f"{taxonomy_class}'s producer now gets {taxonomy(observation)}: {observation['result_payload']['errors']}"
    )

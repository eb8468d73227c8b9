"""A call published again, byte for byte (what `ToolgateClient.wait` does when no final answer
comes), is answered as the same call: a write replays its stored result, a held call
re-announces its pending approval, a denied one is denied again. Never a second effect."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from tests.unit.factories import draft_key
from toolgate.client import ApprovalClient, Proposed
from toolgate.kafka_security import APPROVALS

from ..conftest import Pipeline
from .test_pipeline import _approval_of, _ledger_for, taxonomy

pytestmark = pytest.mark.timeout(180)

DRAFT = {
    "customer_id": "cust_acme01",
    "currency": "USD",
    "due_date": "2030-12-31",
    "lines": [{"description": "resent", "quantity": 1, "unit_amount_cents": 700}],
}
EMAIL = {"to": "ap@coyote.example", "subject": "Resent", "body": "Once only."}


def _next_answer(pipeline: Pipeline, sent: Proposed, after: dict[str, Any], final: bool = True) -> dict[str, Any]:
    """The call's next observation after the one it already had (same partition: same run)."""
    seen = pipeline.client.observations(
        tenant_id=sent.tenant_id,
        call_ids=[sent.call_id],
        follow=True,
        timeout=45,
        start_offsets=[(after["partition"], after["offset"] + 1)],
    )
    for observed in seen:
        if observed.proposal_digest == sent.proposal_digest and observed.is_final == final:
            return {**observed.as_json(), "partition": observed.partition, "offset": observed.offset}
    raise TimeoutError(f"no further answer for {sent.call_id}")


def _first_answer(pipeline: Pipeline, sent: Proposed, final: bool = True) -> dict[str, Any]:
    observed = pipeline.client.wait(sent, final=final, resend=False)
    return {**observed.as_json(), "partition": observed.partition, "offset": observed.offset}


def test_a_write_published_again_replays_its_result_and_runs_once(pipeline: Pipeline) -> None:
    key = f"resend-{uuid.uuid4().hex}"
    sent = pipeline.propose("invoice.create_draft", DRAFT, idempotency_key=key)
    first = _first_answer(pipeline, sent)
    pipeline.client.resend(sent)
    again = _next_answer(pipeline, sent, first)
    assert taxonomy(first) == taxonomy(again) == "SUCCESS"
    assert again["execution_metadata"]["idempotency_hit"] is True
    assert again["result_payload"]["data"] == first["result_payload"]["data"]
    assert pipeline.sql("SELECT count(*) FROM demo.invoices WHERE operation_key = %s", (draft_key(key),)) == [(1,)]


def test_a_held_call_published_again_announces_its_approval_again_and_a_denial_is_said_again(
    pipeline: Pipeline,
) -> None:
    key = f"resend-{uuid.uuid4().hex}"
    sent = pipeline.propose("notify.send_email", EMAIL, idempotency_key=key)
    approval_id = _approval_of(pipeline, sent)
    interim = _first_answer(pipeline, sent, final=False)
    pipeline.client.resend(sent)
    interim_again = _next_answer(pipeline, sent, interim, final=False)
    assert interim_again["result_payload"]["data"]["approval"]["approval_id"] == approval_id
    approvals = ApprovalClient(
        pipeline.runtime["kafka_bootstrap"],
        client_id="resend",
        deployment_public_key=bytes.fromhex(pipeline.runtime["deployment_public_key"]),
        kafka_config=pipeline.kafka(APPROVALS),  # as the approval service, secured
    )
    packets = [p for p, _ in approvals.requests(["acme"]) if p.approval_id == approval_id]
    approvals.close()
    assert len(packets) == 2, "the pending approval was announced again"
    assert pipeline.sql("SELECT count(*) FROM toolgate.approvals WHERE approval_id = %s", (approval_id,)) == [(1,)]

    assert pipeline.cli("approvals", "deny", approval_id, "--as", "carol").returncode == 0
    denied = _first_answer(pipeline, sent)
    pipeline.client.resend(sent)
    denied_again = _next_answer(pipeline, sent, denied)
    assert taxonomy(denied) == taxonomy(denied_again) == "CONFIRMATION_MISSING"
    assert [e["code"] for e in denied_again["result_payload"]["errors"]] == ["approval_denied"]
    assert _ledger_for(pipeline, key) == []


def test_a_write_published_again_after_its_deadline_replays_its_result_and_a_late_new_one_runs_nothing(
    pipeline: Pipeline,
) -> None:
    key = f"resend-{uuid.uuid4().hex}"
    deadline_ms = int((time.time() + 4) * 1000)
    sent = pipeline.propose("invoice.create_draft", DRAFT, idempotency_key=key, deadline_ms=deadline_ms)
    first = _first_answer(pipeline, sent)
    time.sleep(max(0.0, deadline_ms / 1000 - time.time()) + 0.5)
    pipeline.client.resend(sent)  # it arrives past its deadline: its outcome is said again, not a timeout
    again = _next_answer(pipeline, sent, first)
    assert taxonomy(first) == taxonomy(again) == "SUCCESS"
    assert again["execution_metadata"]["idempotency_hit"] is True

    late_key = f"resend-{uuid.uuid4().hex}"
    late = pipeline.propose("invoice.create_draft", DRAFT, idempotency_key=late_key, deadline_ms=deadline_ms)
    refused = _first_answer(pipeline, late)
    assert [e["code"] for e in refused["result_payload"]["errors"]] == ["deadline_passed"]
    assert pipeline.sql("SELECT count(*) FROM toolgate.idempotency_keys WHERE idempotency_key = %s", (late_key,)) == [
        (0,)
    ]
    assert pipeline.sql("SELECT count(*) FROM demo.invoices WHERE operation_key = %s", (draft_key(key),)) == [(1,)]

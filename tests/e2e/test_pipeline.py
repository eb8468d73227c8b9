"""Acceptance of the pipeline, end to end, against the real broker and Postgres.

Every test publishes through the real topics and reads the agent's observation back;
every observation is checked against the reference observation schema (conftest).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import time
import uuid
from typing import Any

import pytest

from tests.unit.factories import draft_key
from toolgate.schemas.hashing import derive_idempotency_key, payload_hash, provider_key
from toolgate.topics.catalog import Topics

from ..conftest import Pipeline, eventually
from .compensations import compensate, compensate_twice

pytestmark = pytest.mark.timeout(180)


def errors_of(observation: dict[str, Any]) -> list[tuple[str | None, str]]:
    return [(e["field"], e["code"]) for e in observation["result_payload"]["errors"]]


def taxonomy(observation: dict[str, Any]) -> str:
    return str(observation["status"]["taxonomy_class"])


def test_read_only_fetch_succeeds(pipeline: Pipeline) -> None:
    observation = pipeline.call("invoice.fetch", {"invoice_id": "inv_acme0001"})
    assert taxonomy(observation) == "SUCCESS"
    assert observation["status"]["is_error"] is False
    assert observation["result_payload"]["data"] == {
        "invoice_id": "inv_acme0001",
        "customer_id": "cust_acme01",
        "status": "open",
        "currency": "USD",
        "amount_cents": 420000,
        "due_date": "2026-12-31",
    }
    assert observation["tool_identity"]["version"] == "1.0.0"


@pytest.mark.parametrize(
    ("tool", "arguments", "expected_class", "expected_errors"),
    [
        ("invoice.fetch", '{"invoice_id": "inv_acme0001"', "SYNTACTIC_PARSE_FAIL", [(None, "invalid_json")]),
        ("invoice.fetch", "{}", "STRUCTURAL_VIOLATION", [("invoice_id", "missing_field")]),
        ("invoice.fetch", '{"invoice_id": 42}', "TYPE_MISMATCH", [("invoice_id", "type_mismatch")]),
        (
            "invoice.fetch",
            '{"invoice_id": "inv_acme0001", "as_admin": true}',
            "STRUCTURAL_VIOLATION",
            [("as_admin", "unexpected_field")],
        ),
        ("invoice.fetch", '{"invoice_id": "INV-1"}', "OUT_OF_BOUNDS", [("invoice_id", "out_of_bounds.pattern")]),
        (
            "invoice.refund_everything",
            '{"invoice_id": "inv_acme0001"}',
            "STRUCTURAL_VIOLATION",
            [("tool_name", "unknown_tool")],
        ),
    ],
    ids=["malformed-json", "missing-field", "wrong-type", "extra-field", "out-of-bounds", "unknown-tool"],
)
def test_invalid_proposals_get_their_taxonomy_class(
    pipeline: Pipeline, tool: str, arguments: str, expected_class: str, expected_errors: list[tuple[str | None, str]]
) -> None:
    observation = pipeline.call(tool, arguments)
    assert taxonomy(observation) == expected_class
    assert errors_of(observation) == expected_errors
    assert observation["status"]["repairable"] is True
    assert observation["result_payload"]["data"]["feedback"]["next_action"] == "repair_arguments"


def test_wrong_type_reports_expected_and_actual(pipeline: Pipeline) -> None:
    observation = pipeline.call(
        "invoice.create_draft",
        json.dumps(
            {
                "customer_id": "cust_acme01",
                "currency": "USD",
                "due_date": "2030-12-31",
                "lines": [{"description": "x", "quantity": "ten", "unit_amount_cents": 100}],
            }
        ),
    )
    assert taxonomy(observation) == "TYPE_MISMATCH"
    [field_error] = observation["result_payload"]["data"]["feedback"]["field_errors"]
    assert field_error["field"] == "lines[0].quantity"
    assert (field_error["expected"], field_error["actual"]) == ("integer", "string")


def test_other_tenants_invoice_is_as_good_as_missing(pipeline: Pipeline) -> None:
    observation = pipeline.call("invoice.fetch", {"invoice_id": "inv_globex0001"}, tenant_id="acme")
    assert taxonomy(observation) == "STALE_STATE"
    assert errors_of(observation) == [("invoice_id", "resource_missing")]
    assert "globex" not in json.dumps(observation).replace("inv_globex0001", "")  # the owner is not revealed


def test_missing_scope_is_denied(pipeline: Pipeline) -> None:
    observation = pipeline.call("invoice.fetch", {"invoice_id": "inv_acme0001"}, scopes=["notify:send"])
    assert taxonomy(observation) == "PERMISSION_DENIED"
    assert errors_of(observation) == [("principal.scopes", "missing_scope")]


def _approval_of(pipeline: Pipeline, sent: Any) -> str:
    interim = pipeline.wait(sent, final=False)
    assert interim["status"]["code"] == 202
    assert interim["status"]["requires_approval"] is True
    assert taxonomy(interim) == "CONFIRMATION_MISSING"
    return str(interim["result_payload"]["data"]["approval"]["approval_id"])


def _ledger_for(pipeline: Pipeline, key: str, tenant: str = "acme") -> list[dict[str, Any]]:
    """The provider's operations for a caller's key: the provider sees it bound to tenant, tool and version."""
    seen = {provider_key(tenant, tool, "1.0.0", key) for tool in ("payment.charge_card", "notify.send_email")}
    return [op for op in pipeline.provider("/_control/ledger")["operations"] if op["idempotency_key"] in seen]


def test_email_waits_for_approval_and_runs_once(pipeline: Pipeline) -> None:
    key = f"email-{uuid.uuid4().hex}"
    sent = pipeline.propose(
        "notify.send_email",
        {"to": "ap@coyote.example", "subject": "Invoice inv_acme0001", "body": "A friendly reminder."},
        idempotency_key=key,
    )
    approval_id = _approval_of(pipeline, sent)
    time.sleep(1.0)
    assert _ledger_for(pipeline, key) == []  # nothing happens while it waits
    card = pipeline.cli("approvals", "show", approval_id)
    assert card.returncode == 0, card.stderr
    assert "An email with subject" in card.stdout and "HIGH_RISK_EXTERNAL" in card.stdout
    approved = pipeline.cli("approvals", "approve", approval_id, "--as", "carol")
    assert approved.returncode == 0, approved.stderr
    observation = pipeline.wait(sent)
    assert taxonomy(observation) == "SUCCESS"
    assert observation["result_payload"]["data"]["status"] == "sent"
    again = pipeline.cli("approvals", "approve", approval_id, "--as", "carol")  # a double click
    assert again.returncode == 0, again.stderr
    assert "noop: already_decided" in again.stdout  # a clear answer, not an error, not a second vote
    time.sleep(2.0)
    assert len(_ledger_for(pipeline, key)) == 1
    assert pipeline.sql("SELECT status FROM toolgate.idempotency_keys WHERE idempotency_key = %s", (key,)) == [
        ("COMPLETED",)
    ]
    actions = pipeline.sql(
        "SELECT action, actor FROM toolgate.audit_log WHERE detail->>'approval_id' = %s ORDER BY id", (approval_id,)
    )
    assert ("decision_counted", "carol") in actions and ("decision_noop", "carol") in actions


def test_charge_needs_two_distinct_approvers(pipeline: Pipeline) -> None:
    key = f"charge-{uuid.uuid4().hex}"
    invoice = pipeline.open_invoice()
    sent = pipeline.propose(
        "payment.charge_card",
        {"invoice_id": invoice, "amount_cents": 125000, "currency": "USD"},
        idempotency_key=key,
    )
    approval_id = _approval_of(pipeline, sent)
    for _ in range(2):
        assert pipeline.cli("approvals", "approve", approval_id, "--as", "alice").returncode == 0
    time.sleep(2.0)
    assert pipeline.sql("SELECT status FROM toolgate.approvals WHERE approval_id = %s", (approval_id,)) == [
        ("PENDING",)
    ]
    assert _ledger_for(pipeline, key) == []
    assert pipeline.cli("approvals", "approve", approval_id, "--as", "bob").returncode == 0
    observation = pipeline.wait(sent)
    assert taxonomy(observation) == "SUCCESS"
    assert observation["result_payload"]["data"]["status"] == "succeeded"
    [charge] = _ledger_for(pipeline, key)
    assert charge["kind"] == "charge"
    # The charge settled its invoice: charging it again is refused before anyone is asked.
    assert pipeline.sql("SELECT status FROM demo.invoices WHERE invoice_id = %s", (invoice,)) == [("paid",)]
    again = pipeline.call("payment.charge_card", {"invoice_id": invoice, "amount_cents": 125000, "currency": "USD"})
    assert (taxonomy(again), errors_of(again)) == ("STALE_STATE", [("invoice_id", "wrong_state")])
    decided = pipeline.sql(
        "SELECT approver_id FROM toolgate.approval_decisions WHERE approval_id = %s ORDER BY approver_id",
        (approval_id,),
    )
    assert decided == [("alice",), ("bob",)]


def test_charge_is_auto_denied_when_its_approval_expires(pipeline: Pipeline) -> None:
    key = f"charge-{uuid.uuid4().hex}"
    deadline = int((time.time() + 6) * 1000)
    sent = pipeline.propose(
        "payment.charge_card",
        {"invoice_id": pipeline.open_invoice(), "amount_cents": 125000, "currency": "USD"},
        idempotency_key=key,
        deadline_ms=deadline,
    )
    approval_id = _approval_of(pipeline, sent)
    assert pipeline.cli("approvals", "approve", approval_id, "--as", "alice", "--wait", "0").returncode == 0
    observation = pipeline.wait(sent, timeout=30)
    assert taxonomy(observation) == "CONFIRMATION_MISSING"
    assert errors_of(observation) == [("approval", "approval_expired")]
    assert observation["status"]["fail_closed"] is True
    assert pipeline.sql("SELECT status FROM toolgate.approvals WHERE approval_id = %s", (approval_id,)) == [
        ("AUTO_DENIED",)
    ]
    assert _ledger_for(pipeline, key) == []
    late = pipeline.cli("approvals", "approve", approval_id, "--as", "bob")  # too late: refused, audited
    assert late.returncode == 1 and "refused: approval_closed" in late.stdout
    time.sleep(2.0)
    assert _ledger_for(pipeline, key) == []
    refused = pipeline.sql(
        "SELECT actor, detail->>'code' FROM toolgate.audit_log WHERE action = 'decision_refused' "
        "AND detail->>'approval_id' = %s",
        (approval_id,),
    )
    assert ("bob", "approval_closed") in refused  # (alice's may also have come too late)


def _draft(run_id: str, operation: str) -> dict[str, Any]:
    return {
        "customer_id": "cust_acme01",
        "currency": "USD",
        "due_date": "2030-12-31",
        "lines": [{"description": f"Work for {operation}", "quantity": 3, "unit_amount_cents": 2500}],
    }


def test_same_draft_twice_creates_one_invoice(pipeline: Pipeline) -> None:
    run_id, operation = f"run_{uuid.uuid4().hex[:10]}", f"op_{uuid.uuid4().hex[:10]}"
    arguments = _draft(run_id, operation)
    first = pipeline.propose("invoice.create_draft", arguments, run_id=run_id, logical_operation_id=operation)
    second = pipeline.propose("invoice.create_draft", arguments, run_id=run_id, logical_operation_id=operation)
    one, two = pipeline.wait(first), pipeline.wait(second)
    assert taxonomy(one) == taxonomy(two) == "SUCCESS"
    assert one["execution_metadata"]["idempotency_hit"] is False
    assert two["execution_metadata"]["idempotency_hit"] is True
    assert one["result_payload"]["data"] == two["result_payload"]["data"]
    assert one["result_payload"]["data"]["amount_cents"] == 7500
    key = derive_idempotency_key(
        workflow_id=run_id,
        run_id=run_id,
        tenant_id="acme",
        user_id="tester",
        tool_name="invoice.create_draft",
        tool_version=one["tool_identity"]["version"],
        logical_operation_id=operation,
        payload_hash=payload_hash({**arguments, "memo": None}),
    )
    assert pipeline.sql("SELECT count(*) FROM demo.invoices WHERE operation_key = %s", (draft_key(key),)) == [(1,)]
    assert one["verification"]["target_state_reference"] == f"invoice:{one['result_payload']['data']['invoice_id']}"


def test_same_key_with_other_arguments_is_a_signature_mismatch(pipeline: Pipeline) -> None:
    key = f"draft-{uuid.uuid4().hex}"
    first = pipeline.call("invoice.create_draft", _draft("r", "a"), idempotency_key=key)
    assert taxonomy(first) == "SUCCESS"
    tampered = pipeline.call("invoice.create_draft", {**_draft("r", "a"), "currency": "EUR"}, idempotency_key=key)
    assert taxonomy(tampered) == "SIGNATURE_MISMATCH"
    assert tampered["status"]["fail_closed"] is True
    assert pipeline.sql("SELECT count(*) FROM demo.invoices WHERE operation_key = %s", (draft_key(key),)) == [(1,)]


def test_random_bytes_are_dead_lettered_and_the_next_proposal_succeeds(pipeline: Pipeline) -> None:
    garbage = secrets.token_bytes(64)
    run_id = f"run_{uuid.uuid4().hex[:10]}"
    pipeline.client.publish_raw(Topics().proposals, run_id.encode(), garbage)
    pipeline.client.flush()
    observation = pipeline.call("invoice.fetch", {"invoice_id": "inv_acme0001"}, run_id=run_id)
    assert taxonomy(observation) == "SUCCESS"
    [letter] = pipeline.letters(
        lambda r: (
            r["source"].startswith("proposals")
            and r["bytes"] == 64
            and r["stage"] == "validation"
            and r["call_id"] is None
        ),
    )
    shown = json.loads(pipeline.cli("dlq", "show", letter["dead_letter_id"]).stdout)
    assert shown["value_prefix_hex"] == garbage.hex()
    assert shown["taxonomy_class"] == "SYNTACTIC_PARSE_FAIL"
    assert pipeline.cli("dlq", "discard", letter["dead_letter_id"], "--note", "test garbage").returncode == 0
    remaining = json.loads(pipeline.cli("dlq", "list", "--json").stdout)
    assert letter["dead_letter_id"] not in {r["dead_letter_id"] for r in remaining}


def test_undecodable_bytes_naming_a_call_are_dead_lettered_audited_and_never_answered(pipeline: Pipeline) -> None:
    # Headers prove nothing: bytes that are no signed proposal get no answer on any tenant's topic.
    call_id, run_id = f"call_{uuid.uuid4().hex}", f"run_{uuid.uuid4().hex[:10]}"
    start = pipeline.client._end_offsets("acme")
    pipeline.client.publish_raw(
        Topics().proposals,
        run_id.encode(),
        b"\xc3\x01not avro at all",
        [("call_id", call_id.encode()), ("tenant_id", b"acme")],
    )
    pipeline.client.flush()
    audited = eventually(
        lambda: pipeline.sql(
            "SELECT detail->>'code' FROM toolgate.audit_log WHERE call_id = %s AND action = 'refused'", (call_id,)
        )
    )
    assert audited == [("undecodable_proposal",)]
    letters = pipeline.letters(lambda r: r["call_id"] == call_id)
    assert [(r["stage"], r["taxonomy_class"]) for r in letters] == [("validation", "SYNTACTIC_PARSE_FAIL")]
    seen = list(pipeline.client.observations(tenant_id="acme", call_ids=[call_id], start_offsets=start))
    assert seen == []


def test_a_killed_execution_worker_leaves_no_pending_key_and_its_successor_runs_the_call_once(
    pipeline: Pipeline,
) -> None:
    """A Postgres effect reserves its key, runs and records in one transaction: an execution
    worker killed inside it leaves nothing behind, not even a PENDING key, and the call's
    record comes again to its successor, which makes the draft once."""
    run_id, operation = f"run_{uuid.uuid4().hex[:10]}", f"op_{uuid.uuid4().hex[:10]}"
    import psycopg

    blocker = psycopg.connect(pipeline.database_url)
    # Hold inserts into invoices: the execution worker blocks inside its transaction.
    blocker.execute("LOCK TABLE demo.invoices IN SHARE MODE")
    try:
        sent = pipeline.propose(
            "invoice.create_draft", _draft(run_id, operation), run_id=run_id, logical_operation_id=operation
        )
        deadline = time.monotonic() + 30
        while not _waiting_on_invoices(pipeline) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _waiting_on_invoices(pipeline)
        assert pipeline.sql("SELECT status FROM toolgate.idempotency_keys WHERE call_id = %s", (sent.call_id,)) == []
        os.kill(pipeline.worker_pid("execution"), signal.SIGKILL)
        time.sleep(0.5)
    finally:
        blocker.rollback()
        blocker.close()
    observation = pipeline.wait(sent, timeout=60)
    assert taxonomy(observation) == "SUCCESS"
    [(key, status)] = pipeline.sql(
        "SELECT idempotency_key, status FROM toolgate.idempotency_keys WHERE call_id = %s", (sent.call_id,)
    )
    assert status == "COMPLETED"
    assert pipeline.sql("SELECT count(*) FROM demo.invoices WHERE operation_key = %s", (draft_key(key),)) == [(1,)]
    assert (
        pipeline.sql(
            "SELECT action FROM toolgate.audit_log WHERE stage = 'reconciliation' AND call_id = %s", (sent.call_id,)
        )
        == []
    )


def _waiting_on_invoices(pipeline: Pipeline) -> bool:
    """Whether a transaction waits for the lock on demo.invoices (the execution worker's)."""
    return bool(
        pipeline.sql(
            "SELECT 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
            "WHERE c.relname = 'invoices' AND NOT l.granted"
        )
    )


def test_one_trace_per_call_across_all_stages(pipeline: Pipeline) -> None:
    sent = pipeline.propose("invoice.fetch", {"invoice_id": "inv_acme0003"})
    observation = pipeline.wait(sent)
    trace_id = sent.traceparent.split("-")[1]
    assert observation["execution_metadata"]["trace_id"] == trace_id
    stages: set[str] = set()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and len(stages) < 5:
        time.sleep(1.0)
        for path in (pipeline.home / "telemetry").glob("spans-*.jsonl"):
            for line in path.read_text().splitlines():
                span = json.loads(line)
                if span["trace_id"] == trace_id:
                    stages.add(span["attributes"]["toolgate.stage"])
    assert stages == {"validation", "policy", "approval-wait", "execution", "normalization"}


def test_unverifiable_outcome_fails_closed_and_replaying_its_dead_letter_never_executes_twice(
    pipeline: Pipeline,
) -> None:
    key = f"email-{uuid.uuid4().hex}"
    # The provider receives the email but answers only after the call's 5 s timeout, and
    # its status query is down: the outcome is unknown and stays so.
    pipeline.provider("/_control/faults", {"delay_before_ms": 7000, "status_query_status": 503})
    try:
        sent = pipeline.propose(
            "notify.send_email",
            {"to": "ap@coyote.example", "subject": "Reminder", "body": "Please pay."},
            idempotency_key=key,
        )
        approval_id = _approval_of(pipeline, sent)
        assert pipeline.cli("approvals", "approve", approval_id, "--as", "carol").returncode == 0
        verifying = pipeline.first(sent, lambda o: taxonomy(o) == "TIMEOUT")  # the interim "being verified"
        assert verifying["status"]["code"] == 202
        assert verifying["status"]["retryable"] is False  # never retried blindly
        # Not re-published: this test counts every final answer the call gets.
        final = pipeline.wait(sent, timeout=60, resend=False)
    finally:
        pipeline.provider("/_control/faults", {})
    assert taxonomy(final) == "UNKNOWN_ERROR"
    assert final["status"]["fail_closed"] is True
    assert errors_of(final) == [(None, "outcome_unverifiable")]
    assert pipeline.sql("SELECT status FROM toolgate.idempotency_keys WHERE idempotency_key = %s", (key,)) == [
        ("FAILED_FINAL",)
    ]
    assert len(_ledger_for(pipeline, key)) == 1  # it did happen, late: exactly once
    [letter] = pipeline.letters(lambda r: r["call_id"] == sent.call_id)
    assert (letter["stage"], letter["kind"], letter["taxonomy_class"]) == (
        "reconciliation",
        "STAGE_ITEM",
        "UNKNOWN_ERROR",
    )
    for _ in range(2):
        replayed = pipeline.cli("dlq", "replay", letter["dead_letter_id"])
        assert replayed.returncode == 0, replayed.stderr
        assert json.loads(replayed.stdout)["call_id"] == sent.call_id
    time.sleep(3.0)
    answers = [o for o in pipeline.client.observations(tenant_id="acme", call_ids=[sent.call_id]) if o.is_final]
    assert [o.observation.execution_metadata.idempotency_hit for o in answers] == [False, True, True]
    assert len(_ledger_for(pipeline, key)) == 1


def test_an_error_is_answered_as_the_tools_error_contract_says(pipeline: Pipeline) -> None:
    """notify.send_email leaves IDEMPOTENCY_CONFLICT out of its retryable errors: when its provider
    keeps answering 409 (in progress) past execution's own retries, the agent is told not to retry,
    where the taxonomy alone would let it."""
    pipeline.provider("/_control/faults", {"fail_statuses": [409] * 20})
    try:
        sent = pipeline.propose(
            "notify.send_email",
            {"to": "ap@coyote.example", "subject": "Reminder", "body": "Please pay."},
            idempotency_key=f"email-{uuid.uuid4().hex}",
        )
        approval_id = _approval_of(pipeline, sent)
        assert pipeline.cli("approvals", "approve", approval_id, "--as", "carol").returncode == 0
        final = pipeline.wait(sent, timeout=60)
    finally:
        pipeline.provider("/_control/faults", {})
    assert taxonomy(final) == "IDEMPOTENCY_CONFLICT"
    assert final["status"]["retryable"] is False
    assert final["result_payload"]["data"]["feedback"]["retryable"] is False


def test_compensation_undoes_a_draft_exactly_once(pipeline: Pipeline) -> None:
    run_id, operation = f"run_{uuid.uuid4().hex[:10]}", f"op_{uuid.uuid4().hex[:10]}"
    sent = pipeline.propose(
        "invoice.create_draft", _draft(run_id, operation), run_id=run_id, logical_operation_id=operation
    )
    created = pipeline.wait(sent)
    invoice_id = created["result_payload"]["data"]["invoice_id"]
    compensate_twice(pipeline, sent.call_id, {"invoice_id": invoice_id, "status": "void"})
    assert pipeline.sql("SELECT status FROM demo.invoices WHERE invoice_id = %s", (invoice_id,)) == [("void",)]
    [(status, by)] = pipeline.sql(
        "SELECT status, compensated_by FROM toolgate.idempotency_keys WHERE call_id = %s", (sent.call_id,)
    )
    assert status == "COMPENSATED" and by is not None
    again = pipeline.call(
        "invoice.create_draft", _draft(run_id, operation), run_id=run_id, logical_operation_id=operation
    )
    assert again["execution_metadata"]["idempotency_hit"] is True
    assert again["verification"]["post_action_verification_required"] is True
    assert any("compensated" in w for w in again["result_payload"]["warnings"])


def test_a_failed_compensation_is_reported_and_dead_lettered(pipeline: Pipeline) -> None:
    sent = pipeline.propose("invoice.create_draft", _draft("r", "x"))
    invoice_id = pipeline.wait(sent)["result_payload"]["data"]["invoice_id"]
    pipeline.sql("UPDATE demo.invoices SET status = 'open' WHERE invoice_id = %s", (invoice_id,))  # finalized meanwhile
    result = compensate(pipeline, sent.call_id)
    observation = result["observation"]
    assert taxonomy(observation) == "COMPENSATION_FAILED"
    assert observation["status"]["fail_closed"] is True and observation["status"]["requires_approval"] is True
    assert pipeline.sql(
        "SELECT status, error_code FROM toolgate.idempotency_keys WHERE call_id = %s", (sent.call_id,)
    ) == [("COMPLETED", "COMPENSATION_FAILED")]
    assert pipeline.sql("SELECT status FROM demo.invoices WHERE invoice_id = %s", (invoice_id,)) == [("open",)]
    letters = pipeline.letters(lambda r: r["call_id"] == result["call_id"])
    assert [(r["stage"], r["taxonomy_class"]) for r in letters] == [("execution", "COMPENSATION_FAILED")]


def test_a_compensation_must_name_a_call_it_can_undo(pipeline: Pipeline) -> None:
    fetched = pipeline.propose("invoice.fetch", {"invoice_id": "inv_acme0001"})
    pipeline.wait(fetched)
    refused = pipeline.call("invoice.void_draft", {"invoice_id": "inv_acme0001"}, compensation_of=fetched.call_id)
    assert taxonomy(refused) == "STALE_STATE"  # a read has no committed effect
    assert errors_of(refused) == [("compensation_of", "nothing_to_compensate")]


def test_a_canary_secret_appears_in_no_observation_log_span_or_dead_letter(pipeline: Pipeline) -> None:
    # The canary is the provider's real bearer token, resolved only inside the executors.
    canary = (pipeline.home / "secrets" / "demo-provider-token").read_text().strip()
    key = f"email-{uuid.uuid4().hex}"
    pipeline.provider("/_control/faults", {"echo_credentials": True})  # a provider that leaks it back
    try:
        sent = pipeline.propose(
            "notify.send_email", {"to": "ap@coyote.example", "subject": "Hello", "body": canary}, idempotency_key=key
        )
        approval_id = _approval_of(pipeline, sent)
        assert pipeline.cli("approvals", "approve", approval_id, "--as", "carol").returncode == 0
        observation = pipeline.wait(sent)
    finally:
        pipeline.provider("/_control/faults", {})
    # The leaked field breaks the output contract: the agent gets a typed failure, not the payload.
    assert taxonomy(observation) == "OBSERVATION_NORMALIZATION_FAIL"
    time.sleep(2.0)  # let spans and logs flush
    observations = [o.as_json() for o in pipeline.client.observations(tenant_id="acme", call_ids=[sent.call_id])]
    assert observations and canary not in json.dumps(observations)
    letters = json.loads(pipeline.cli("dlq", "list", "--json", "--all").stdout)
    mine = [r for r in letters if r["call_id"] == sent.call_id]
    assert mine, "the unnormalizable result is dead-lettered for an operator"
    for letter in mine:
        shown = pipeline.cli("dlq", "show", letter["dead_letter_id"]).stdout
        assert canary not in shown
    from toolgate.ops.dlq import read_all

    assert all(canary.encode() not in found.letter.value for found in read_all(pipeline.settings))
    deployment_secret = (pipeline.home / "secrets" / "deployment-secret").read_text().strip()
    for path in [*(pipeline.home / "logs").glob("*.log"), *(pipeline.home / "telemetry").glob("*.jsonl")]:
        text = path.read_text(errors="replace")
        assert canary not in text, f"the canary leaked into {path.name}"
        assert deployment_secret not in text, f"the deployment secret leaked into {path.name}"
    stored = pipeline.sql("SELECT response::text FROM toolgate.idempotency_keys WHERE idempotency_key = %s", (key,))
    assert stored and canary not in stored[0][0] and "[REDACTED]" in stored[0][0]


def test_a_python_executed_tool(pipeline: Pipeline) -> None:
    observation = pipeline.call(
        "invoice.tax_estimate", {"amount_cents": 100000, "country": "DE"}, scopes=["invoices:read"]
    )
    assert taxonomy(observation) == "SUCCESS"
    assert observation["result_payload"]["data"] == {
        "country": "DE",
        "rate_basis_points": 1900,
        "tax_cents": 19000,
        "total_cents": 119000,
    }

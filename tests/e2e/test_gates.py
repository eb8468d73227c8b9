"""The gates against a hostile or confused agent, through the real broker and Postgres.

Each attack is shown to be refused (the typed observation, or no effect at all) and
audited (its row in the hash-chained audit log).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from toolgate.client import ApprovalClient
from toolgate.kafka_security import APPROVALS
from toolgate.schemas.models import ApprovalDecision, ApprovalRequest, Verdict
from toolgate.trust.signing import Keyring, new_key, sign

from ..conftest import Pipeline
from .test_pipeline import _approval_of, _ledger_for, errors_of, taxonomy

pytestmark = pytest.mark.timeout(180)

CHARGE = {"invoice_id": "inv_acme0002", "amount_cents": 125000, "currency": "USD"}
EMAIL = {"to": "ap@coyote.example", "subject": "Invoice inv_acme0001", "body": "A friendly reminder."}


def refusal_audit(pipeline: Pipeline, call_id: str) -> list[tuple[str, str]]:
    rows = pipeline.sql(
        "SELECT detail->>'taxonomy', detail->>'code' FROM toolgate.audit_log WHERE call_id = %s AND action = 'refused'",
        (call_id,),
    )
    return [(str(t), str(c)) for t, c in rows]


def decision_audit(pipeline: Pipeline, decision_id: str, timeout: float = 20.0) -> tuple[str, str]:
    """The audit row the approval-wait stage wrote for one decision: (action, code)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = pipeline.sql(
            "SELECT action, coalesce(detail->>'code', detail->>'status_after') FROM toolgate.audit_log "
            "WHERE detail->>'decision_id' = %s ORDER BY id",
            (decision_id,),
        )
        if rows:
            return str(rows[-1][0]), str(rows[-1][1])
        time.sleep(0.2)
    raise TimeoutError(f"decision {decision_id} was never judged")


def status_of(pipeline: Pipeline, approval_id: str) -> str:
    return str(pipeline.sql("SELECT status FROM toolgate.approvals WHERE approval_id = %s", (approval_id,))[0][0])


def packet_of(pipeline: Pipeline, approval_id: str) -> ApprovalRequest:
    [(packet,)] = pipeline.sql("SELECT packet FROM toolgate.approvals WHERE approval_id = %s", (approval_id,))
    return ApprovalRequest.model_validate(packet)


class Approvers:
    """Decisions as an approval service (or an attacker) would publish them."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline
        self.keyring = Keyring(pipeline.home / "approvers")
        self.client = ApprovalClient(  # as the approval service, secured
            pipeline.runtime["kafka_bootstrap"], client_id="pytest-approver", kafka_config=pipeline.kafka(APPROVALS)
        )

    def decide(self, packet: ApprovalRequest, who: str, approve: bool = True, **kwargs: Any) -> ApprovalDecision:
        return self.client.decide(packet, approver_id=who, key=self.keyring.load(who), approve=approve, **kwargs)

    def forge(self, packet: ApprovalRequest, who: str, **changes: Any) -> ApprovalDecision:
        """A decision signed by `who`'s real key but naming something else (`changes`), or
        signed by another key altogether when `key` is given."""
        key = changes.pop("key", None) or self.keyring.load(who)
        now = int(time.time() * 1000)
        fields: dict[str, Any] = {
            "decision_id": f"dec_{uuid.uuid4().hex}",
            "approval_id": packet.approval_id,
            "decision": Verdict.APPROVE,
            "approver_id": who,
            "tool_name": packet.tool_name,
            "tool_version": packet.tool_version,
            "payload_hash": packet.payload_hash,
            "reason": None,
            "decided_at_ms": now,
            "expires_at_ms": now + 300_000,
            "signature": b"",
        }
        decision = sign(ApprovalDecision(**{**fields, **changes}), key)
        self.client.publish_decision(decision, packet)
        return decision

    def close(self) -> None:
        self.client.close()


@pytest.fixture
def approvers(pipeline: Pipeline) -> Any:
    a = Approvers(pipeline)
    yield a
    a.close()


def held_charge(pipeline: Pipeline, **kwargs: Any) -> tuple[Any, str, str]:
    key = f"charge-{uuid.uuid4().hex}"
    charge = {**CHARGE, "invoice_id": pipeline.open_invoice()}
    sent = pipeline.propose("payment.charge_card", charge, idempotency_key=key, **kwargs)
    return sent, _approval_of(pipeline, sent), key


# --- policy ----------------------------------------------------------------------------------


def test_a_cross_tenant_invoice_is_refused_as_missing_and_audited_as_cross_tenant(pipeline: Pipeline) -> None:
    sent = pipeline.propose("invoice.fetch", {"invoice_id": "inv_globex0001"}, tenant_id="acme")
    observation = pipeline.wait(sent)
    assert (taxonomy(observation), errors_of(observation)) == ("STALE_STATE", [("invoice_id", "resource_missing")])
    assert refusal_audit(pipeline, sent.call_id) == [("STALE_STATE", "resource_missing")]
    [(finding,)] = pipeline.sql(
        "SELECT detail->>'finding' FROM toolgate.audit_log WHERE call_id = %s AND action = 'refused'", (sent.call_id,)
    )
    assert finding == "cross_tenant"


def test_a_missing_scope_is_refused_and_audited(pipeline: Pipeline) -> None:
    sent = pipeline.propose("payment.charge_card", CHARGE, scopes=["invoices:read"])
    observation = pipeline.wait(sent)
    assert (taxonomy(observation), errors_of(observation)) == (
        "PERMISSION_DENIED",
        [("principal.scopes", "missing_scope")],
    )
    assert refusal_audit(pipeline, sent.call_id) == [("PERMISSION_DENIED", "missing_scope")]


def test_the_eleventh_email_of_a_run_is_beyond_its_budget_of_ten(pipeline: Pipeline, approvers: Approvers) -> None:
    run_id = f"run_budget_{uuid.uuid4().hex[:8]}"
    sent = [pipeline.propose("notify.send_email", EMAIL, run_id=run_id) for _ in range(11)]
    answers = [pipeline.wait(s, final=False) for s in sent]
    held = [a for a in answers if a["status"]["code"] == 202]
    refused = [(s, a) for s, a in zip(sent, answers, strict=True) if a["status"]["code"] != 202]
    assert len(held) == 10 and len(refused) == 1
    [(eleventh, observation)] = refused
    assert taxonomy(observation) == "BUDGET_EXHAUSTED"
    assert errors_of(observation) == [(None, "budget.external_action")]
    assert "10 of 10" in observation["result_payload"]["errors"][0]["message"]
    assert refusal_audit(pipeline, eleventh.call_id) == [("BUDGET_EXHAUSTED", "budget.external_action")]
    for answer in held:  # leave nothing waiting on an approver
        packet = packet_of(pipeline, answer["result_payload"]["data"]["approval"]["approval_id"])
        approvers.decide(packet, "carol", approve=False, reason="budget test")


def test_a_burst_beyond_the_rate_limit_is_told_when_to_retry(pipeline: Pipeline) -> None:
    # invoice.tax_estimate allows 5 calls per 10 s per tenant; globex is used by no other test.
    sent = [
        pipeline.propose(
            "invoice.tax_estimate",
            {"amount_cents": 1000, "country": "DE"},
            tenant_id="globex",
            scopes=["invoices:read"],
        )
        for _ in range(7)
    ]
    answers = [pipeline.wait(s) for s in sent]
    assert sorted(taxonomy(a) for a in answers) == ["RATE_LIMITED"] * 2 + ["SUCCESS"] * 5
    for s, answer in zip(sent, answers, strict=True):
        if taxonomy(answer) == "RATE_LIMITED":
            feedback = answer["result_payload"]["data"]["feedback"]
            assert 0 < feedback["retry_after_ms"] <= 10_000 and answer["status"]["retryable"] is True
            assert refusal_audit(pipeline, s.call_id) == [("RATE_LIMITED", "rate_limited")]


def test_stale_state_a_paid_invoice_and_a_changed_amount(pipeline: Pipeline) -> None:
    paid = pipeline.call("payment.charge_card", {**CHARGE, "invoice_id": "inv_acme0003", "amount_cents": 99000})
    assert (taxonomy(paid), errors_of(paid)) == ("STALE_STATE", [("invoice_id", "wrong_state")])
    changed = pipeline.call("payment.charge_card", {**CHARGE, "amount_cents": 120000})
    assert (taxonomy(changed), errors_of(changed)) == ("STALE_STATE", [("amount_cents", "changed")])
    missing = pipeline.call("payment.charge_card", {**CHARGE, "invoice_id": "inv_acme9999"})
    assert (taxonomy(missing), errors_of(missing)) == ("STALE_STATE", [("invoice_id", "resource_missing")])


# --- validation ------------------------------------------------------------------------------


def test_semantic_rules_a_past_due_date_and_a_currency_not_the_invoices(pipeline: Pipeline) -> None:
    draft = {
        "customer_id": "cust_acme01",
        "currency": "USD",
        "due_date": "2020-01-31",
        "lines": [{"description": "x", "quantity": 1, "unit_amount_cents": 100}],
    }
    past = pipeline.call("invoice.create_draft", draft)
    assert (taxonomy(past), errors_of(past)) == ("SEMANTIC_INVALIDITY", [("due_date", "semantic.due-date-not-past")])
    assert past["status"]["repairable"] is True
    euros = pipeline.call("payment.charge_card", {**CHARGE, "currency": "EUR"})
    assert taxonomy(euros) == "SEMANTIC_INVALIDITY"
    assert errors_of(euros) == [("currency", "semantic.currency-of-invoice")]
    [error] = euros["result_payload"]["data"]["feedback"]["field_errors"]
    assert (error["expected"], error["actual"]) == ("USD", "EUR")


def test_the_repair_loop_ends_when_the_same_invalid_arguments_come_back(pipeline: Pipeline) -> None:
    run_id, operation = f"run_{uuid.uuid4().hex[:10]}", f"op_{uuid.uuid4().hex[:10]}"
    bad = {"invoice_id": 42}
    first = pipeline.call("invoice.fetch", bad, run_id=run_id, logical_operation_id=operation)
    assert taxonomy(first) == "TYPE_MISMATCH" and first["status"]["repairable"] is True
    again = pipeline.call("invoice.fetch", bad, run_id=run_id, logical_operation_id=operation, repair_attempt=1)
    assert taxonomy(again) == "BUDGET_EXHAUSTED"
    assert again["status"]["repairable"] is False
    assert errors_of(again)[0] == (None, "repair_loop_exhausted")
    assert "same invalid arguments" in again["result_payload"]["errors"][0]["message"]
    fixed = pipeline.call("invoice.fetch", {"invoice_id": "inv_acme0001"}, run_id=run_id)  # another operation
    assert taxonomy(fixed) == "SUCCESS"


def test_a_deprecated_version_answers_with_a_warning(pipeline: Pipeline) -> None:
    observation = pipeline.call("invoice.fetch", {"invoice_id": "inv_acme0001"}, version="0.9.0")
    assert taxonomy(observation) == "SUCCESS"
    assert any("deprecated" in w for w in observation["result_payload"]["warnings"])
    current = pipeline.call("invoice.fetch", {"invoice_id": "inv_acme0001"})
    assert not any("deprecated" in w for w in current["result_payload"]["warnings"])


def test_a_sunsetted_version_is_refused_naming_its_replacement(pipeline: Pipeline) -> None:
    old = pipeline.call("invoice.create_draft", {"customer_id": "cus_acme01"}, version="1.0.0")
    assert taxonomy(old) == "STRUCTURAL_VIOLATION" and old["status"]["repairable"] is True
    [error] = old["result_payload"]["data"]["feedback"]["field_errors"]
    assert (error["field"], error["code"], error["expected"]) == (
        "tool_version",
        "version_sunsetted",
        "invoice.create_draft@1.0.1",
    )
    assert error["message"] == "invoice.create_draft 1.0.0 was sunset on 2026-11-28; use invoice.create_draft@1.0.1"


# --- approvals -------------------------------------------------------------------------------


def test_a_forged_decision_is_refused_and_audited(pipeline: Pipeline, approvers: Approvers) -> None:
    _, approval_id, key = held_charge(pipeline)
    packet = packet_of(pipeline, approval_id)
    forged = approvers.forge(packet, "alice", key=new_key())  # alice's name, someone else's key
    assert decision_audit(pipeline, forged.decision_id) == ("decision_refused", "bad_signature")
    tampered = approvers.forge(packet, "bob")
    tampered = tampered.model_copy(update={"decision_id": f"dec_{uuid.uuid4().hex}"})  # changed after signing
    approvers.client.publish_decision(tampered, packet)
    assert decision_audit(pipeline, tampered.decision_id) == ("decision_refused", "bad_signature")
    assert status_of(pipeline, approval_id) == "PENDING" and _ledger_for(pipeline, key) == []


def test_a_decision_for_another_payload_is_refused_and_audited(pipeline: Pipeline, approvers: Approvers) -> None:
    _, approval_id, key = held_charge(pipeline)
    packet = packet_of(pipeline, approval_id)
    other = approvers.forge(packet, "alice", payload_hash="sha256:" + "0" * 64)
    assert decision_audit(pipeline, other.decision_id) == ("decision_refused", "payload_mismatch")
    other_tool = approvers.forge(packet, "bob", tool_name="notify.send_email")
    assert decision_audit(pipeline, other_tool.decision_id) == ("decision_refused", "payload_mismatch")
    assert status_of(pipeline, approval_id) == "PENDING" and _ledger_for(pipeline, key) == []


def test_a_replayed_decision_is_not_a_second_vote(pipeline: Pipeline, approvers: Approvers) -> None:
    _, approval_id, key = held_charge(pipeline)
    packet = packet_of(pipeline, approval_id)
    original = approvers.decide(packet, "alice")
    assert decision_audit(pipeline, original.decision_id) == ("decision_counted", "PENDING")
    approvers.client.publish_decision(original, packet)  # the same signed bytes again
    time.sleep(1.5)
    rows = pipeline.sql(
        "SELECT action, detail->>'code' FROM toolgate.audit_log WHERE detail->>'decision_id' = %s ORDER BY id",
        (original.decision_id,),
    )
    assert rows == [("decision_counted", None), ("decision_noop", "duplicate_decision")]
    assert status_of(pipeline, approval_id) == "PENDING" and _ledger_for(pipeline, key) == []


def test_an_expired_decision_is_refused_and_audited(pipeline: Pipeline, approvers: Approvers) -> None:
    _, approval_id, key = held_charge(pipeline)
    late = approvers.decide(packet_of(pipeline, approval_id), "alice", valid_for_s=-1)
    assert decision_audit(pipeline, late.decision_id) == ("decision_refused", "decision_expired")
    assert status_of(pipeline, approval_id) == "PENDING" and _ledger_for(pipeline, key) == []


def test_the_same_approver_twice_is_one_vote_on_a_two_approver_charge(pipeline: Pipeline, approvers: Approvers) -> None:
    _, approval_id, key = held_charge(pipeline)
    packet = packet_of(pipeline, approval_id)
    first = approvers.decide(packet, "alice")
    assert decision_audit(pipeline, first.decision_id) == ("decision_counted", "PENDING")
    second = approvers.decide(packet, "alice")  # a new decision id: a second click, not a replay
    assert decision_audit(pipeline, second.decision_id) == ("decision_noop", "already_decided")
    assert status_of(pipeline, approval_id) == "PENDING" and _ledger_for(pipeline, key) == []


def test_an_approver_not_allowed_for_critical_mutations_is_refused(pipeline: Pipeline, approvers: Approvers) -> None:
    _, approval_id, key = held_charge(pipeline)
    carol = approvers.decide(packet_of(pipeline, approval_id), "carol")  # MEDIUM_RISK_WRITE, HIGH_RISK_EXTERNAL only
    assert decision_audit(pipeline, carol.decision_id) == ("decision_refused", "approver_not_allowed")
    assert status_of(pipeline, approval_id) == "PENDING" and _ledger_for(pipeline, key) == []


def test_the_card_shows_before_state_and_the_approval_escalates(pipeline: Pipeline, approvers: Approvers) -> None:
    # A 12-second window: the second group (finance-directors: dave) joins after half of it.
    sent, approval_id, key = held_charge(pipeline, deadline_ms=int((time.time() + 12) * 1000))
    packet = packet_of(pipeline, approval_id)
    assert packet.before_state == {"status": "open", "currency": "USD", "amount_cents": 125000}
    assert packet.approver_groups == ["finance-controllers"]
    card = pipeline.cli("approvals", "show", approval_id)
    assert card.returncode == 0, card.stderr
    assert '"status": "open"' in card.stdout and "finance-controllers" in card.stdout
    early = approvers.decide(packet, "dave")
    assert decision_audit(pipeline, early.decision_id) == ("decision_refused", "approver_not_in_group")
    alice = approvers.decide(packet, "alice")
    assert decision_audit(pipeline, alice.decision_id) == ("decision_counted", "PENDING")
    deadline = time.monotonic() + 10
    while packet_of(pipeline, approval_id).escalation_level == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    up = packet_of(pipeline, approval_id)
    assert (up.escalation_level, up.approver_groups) == (1, ["finance-controllers", "finance-directors"])
    assert pipeline.sql(
        "SELECT count(*) FROM toolgate.audit_log WHERE action = 'approval_escalated' AND detail->>'approval_id' = %s",
        (approval_id,),
    ) == [(1,)]
    dave = approvers.decide(up, "dave")
    assert decision_audit(pipeline, dave.decision_id) == ("decision_counted", "APPROVED")
    assert taxonomy(pipeline.wait(sent)) == "SUCCESS"
    assert len(_ledger_for(pipeline, key)) == 1


# --- dry run ---------------------------------------------------------------------------------


def test_a_dry_run_passes_every_gate_and_previews_without_executing(pipeline: Pipeline) -> None:
    key = f"charge-{uuid.uuid4().hex}"
    sent = pipeline.propose("payment.charge_card", CHARGE, idempotency_key=key, dry_run=True)
    observation = pipeline.wait(sent)
    assert taxonomy(observation) == "SUCCESS" and observation["status"]["requires_approval"] is False
    shown = observation["result_payload"]["data"]
    assert shown["dry_run"] is True
    assert shown["effects"] == [
        {"kind": "http", "operation": "POST", "target": "demo_provider/v1/charges", "external": True}
    ]
    assert shown["impact"]["approvals_required"] == 2
    assert shown["impact"]["budget_dimensions"] == ["critical_mutation", "financial"]
    policy = next(p for p in shown["preconditions"] if p["stage"] == "policy")
    assert "financial per_run: 1 of 100" in policy["detail"]
    assert pipeline.sql("SELECT count(*) FROM toolgate.approvals WHERE call_id = %s", (sent.call_id,)) == [(0,)]
    assert pipeline.sql("SELECT count(*) FROM toolgate.usage_events WHERE run_id = %s", (sent.run_id,)) == [(0,)]
    time.sleep(1.0)
    assert _ledger_for(pipeline, key) == []
    refused = pipeline.call("invoice.fetch", {"invoice_id": "inv_globex0001"}, dry_run=True)
    assert taxonomy(refused) == "STALE_STATE"  # a dry run meets every gate the real call would

"""Approvers belong to tenants (review N13), through the running `toolgate up`: a globex ticket
decided by an approver registered only for acme is refused (`approver_not_for_tenant`), never
counts, and the call does not run; execution counts only the approvers of the ticket's tenant
itself, so an approval given before an approver was moved to another tenant no longer
releases anything; `approvers add` needs a registered tenant, and the CLI offers an approver
only the tickets of the tenants it serves."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from ..conftest import Pipeline
from .test_gates import Approvers, decision_audit, packet_of, status_of
from .test_pipeline import _approval_of, _ledger_for, errors_of, taxonomy

pytestmark = pytest.mark.timeout(240)


def ok(done: Any) -> Any:
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def said(done: Any) -> str:
    return " ".join(f"{done.stdout} {done.stderr}".split())


def test_an_acme_approver_never_decides_a_globex_call(pipeline: Pipeline) -> None:
    key = f"mail-{uuid.uuid4().hex[:8]}"
    email = {"to": "ap@globex.example", "subject": "Globex only", "body": "For globex's approvers."}
    sent = pipeline.propose("notify.send_email", email, tenant_id="globex", idempotency_key=key)
    approval_id = _approval_of(pipeline, sent)
    packet = packet_of(pipeline, approval_id)
    approvers = Approvers(pipeline)
    try:
        alice = approvers.decide(packet, "alice")  # acme's finance, signed with her real key
        assert decision_audit(pipeline, alice.decision_id) == ("decision_refused", "approver_not_for_tenant")
        assert status_of(pipeline, approval_id) == "PENDING"
        recorded = "SELECT count(*) FROM toolgate.approval_decisions WHERE approval_id = %s"
        assert pipeline.sql(recorded, (approval_id,)) == [(0,)]
        # The CLI does not even sign it for her, and does not list globex's tickets to her.
        refused = pipeline.cli("approvals", "approve", approval_id, "--as", "alice")
        assert refused.returncode == 1 and "not an active approver of tenant globex" in said(refused)
        hers = json.loads(ok(pipeline.cli("approvals", "list", "--for", "alice", "--json")).stdout)
        assert approval_id not in {r["approval_id"] for r in hers} and {r["tenant"] for r in hers} <= {"acme"}
        carols = json.loads(ok(pipeline.cli("approvals", "list", "--for", "carol", "--json")).stdout)
        assert approval_id in {r["approval_id"] for r in carols}
        carol = approvers.decide(packet, "carol", approve=False, reason="not needed")  # globex's approver
        assert decision_audit(pipeline, carol.decision_id) == ("decision_counted", "DENIED")
    finally:
        approvers.close()
    final = pipeline.wait(sent)
    assert (taxonomy(final), [code for _, code in errors_of(final)]) == ("CONFIRMATION_MISSING", ["approval_denied"])
    assert _ledger_for(pipeline, key, "globex") == []


def test_execution_counts_only_the_approvers_of_the_tickets_tenant(pipeline: Pipeline) -> None:
    """alice approves an acme charge, then is moved to globex only, and bob gives the second
    approval: approval-wait releases the call on its record of two approvals, and execution,
    counting the approvers of acme for itself, finds one and runs nothing."""
    key = f"charge-{uuid.uuid4().hex}"
    charge = {"invoice_id": pipeline.open_invoice(), "amount_cents": 125000, "currency": "USD"}
    approvers = Approvers(pipeline)
    try:
        sent = pipeline.propose("payment.charge_card", charge, idempotency_key=key)
        packet = packet_of(pipeline, _approval_of(pipeline, sent))
        first = approvers.decide(packet, "alice")
        assert decision_audit(pipeline, first.decision_id) == ("decision_counted", "PENDING")
        ok(pipeline.cli("approvers", "tenants", "alice", "--tenant", "globex", "--as", "sec-ops"))
        second = approvers.decide(packet, "bob")
        assert decision_audit(pipeline, second.decision_id) == ("decision_counted", "APPROVED")
        final = pipeline.wait(sent)
    finally:
        ok(pipeline.cli("approvers", "tenants", "alice", "--tenant", "acme"))
        approvers.close()
    assert (taxonomy(final), [code for _, code in errors_of(final)]) == ("CONFIRMATION_MISSING", ["too_few_approvers"])
    assert _ledger_for(pipeline, key) == []
    assert pipeline.sql("SELECT status FROM demo.invoices WHERE invoice_id = %s", (charge["invoice_id"],)) == [
        ("open",)
    ]
    changes = pipeline.sql(
        "SELECT actor, detail->'tenants', detail->'previous_tenants' FROM toolgate.audit_log "
        "WHERE action = 'approver_tenants_changed' AND detail->>'approver' = 'alice' ORDER BY id DESC LIMIT 2",
    )
    assert changes == [("operator", ["acme"], ["globex"]), ("sec-ops", ["globex"], ["acme"])]


def test_an_approver_is_registered_for_registered_tenants(pipeline: Pipeline) -> None:
    erin = f"erin-{uuid.uuid4().hex[:8]}"
    none = pipeline.cli("approvers", "add", erin)
    assert none.returncode == 1 and "serves at least one tenant" in said(none), said(none)
    unknown = pipeline.cli("approvers", "add", erin, "--tenant", "acme", "--tenant", "initech")
    assert unknown.returncode == 1 and "tenant initech is not registered" in said(unknown), said(unknown)
    assert pipeline.sql("SELECT count(*) FROM toolgate.approvers WHERE approver_id = %s", (erin,)) == [(0,)]
    ok(pipeline.cli("approvers", "add", erin, "--tenant", "globex", "--tenant", "acme"))
    listed = {r["approver"]: r for r in json.loads(ok(pipeline.cli("approvers", "list", "--json")).stdout)}
    assert listed[erin]["tenants"] == ["acme", "globex"]
    assert {a: listed[a]["tenants"] for a in ("alice", "bob", "carol", "dave")} == {
        "alice": ["acme"],
        "bob": ["acme"],
        "carol": ["acme", "globex"],
        "dave": ["acme"],
    }

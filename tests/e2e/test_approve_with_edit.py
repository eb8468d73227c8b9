"""Approve with edit (issue 52, part 3), through the running `toolgate up`: a charge held for two
approvals is approved by alice with a narrower amount (`toolgate approvals approve --edit`); the
held ticket closes EDITED, the edited call goes back through validation and policy, is held again
with alice counted once, and runs once, with the edited amount, when bob approves it; the agent's
one final observation says who edited it and the diff. An editor revoked, or given a new key,
between the edit and its re-entry still leaves the call one answer. An edit that widens is refused
with its reason and the ticket stays open; a forged re-entry (an edit decision not signed by the approver,
or signed over another call's payload) is dead-lettered and nothing runs."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from typing import Any

import pytest

from toolgate.contracts.edits import read_note
from toolgate.schemas.codec import codec
from toolgate.schemas.models import ApprovalDecision, ApprovalRequest, StageRecord, ToolProposal, Verdict
from toolgate.schemas.wire import canonical_json
from toolgate.trust.signing import new_key, sign
from toolgate.workers.approval.edited import reentry

from ..conftest import Pipeline, eventually
from .test_approver_tenants import ok, said
from .test_gates import Approvers, decision_audit, packet_of, status_of
from .test_pipeline import _approval_of, _ledger_for, errors_of, taxonomy
from .test_trust_boundary import audit_rows, dead_letters, publish_proposal

pytestmark = pytest.mark.timeout(240)


def held_charge(pipeline: Pipeline, amount: int = 125000) -> tuple[Any, str, str, dict[str, Any]]:
    key = f"charge-{uuid.uuid4().hex}"
    charge = {"invoice_id": pipeline.open_invoice(amount), "amount_cents": amount, "currency": "USD"}
    sent = pipeline.propose("payment.charge_card", charge, idempotency_key=key)
    return sent, _approval_of(pipeline, sent), key, charge


def edited_ticket(pipeline: Pipeline, approval_id: str) -> str:
    """The ticket of the call edited from `approval_id`, once approval-wait opened it."""
    rows = eventually(
        lambda: pipeline.sql("SELECT approval_id FROM toolgate.approvals WHERE edit_of = %s", (approval_id,))
    )
    return str(rows[0][0])


def test_an_edit_that_narrows_runs_once_with_the_edited_amount(pipeline: Pipeline) -> None:
    sent, approval_id, key, charge = held_charge(pipeline)
    # The invoice was credited down while the charge waited: the approver charges what is owed.
    pipeline.sql("UPDATE demo.invoices SET amount_cents = 100000 WHERE invoice_id = %s", (charge["invoice_id"],))
    edited = pipeline.cli(
        "approvals", "approve", approval_id, "--as", "alice", "--edit", '{"amount_cents": 100000}', "--json"
    )
    judged = json.loads(ok(edited).stdout)
    assert judged["verdict"] == "approved with edit"
    assert (judged["judgment"]["outcome"], judged["judgment"]["status_after"]) == ("counted", "EDITED")
    assert status_of(pipeline, approval_id) == "EDITED"
    [(edited_by, decision_id, edited_hash)] = pipeline.sql(
        "SELECT edited_by, edit_decision_id, edited_payload_hash FROM toolgate.approvals WHERE approval_id = %s",
        (approval_id,),
    )
    assert (edited_by, decision_id) == ("alice", judged["decision_id"])
    second = edited_ticket(pipeline, approval_id)
    assert judged["judgment"]["edited_approval_id"] == second  # the CLI says where the edited call waits
    packet = packet_of(pipeline, second)
    assert packet.arguments["amount_cents"] == 100000 and packet.payload_hash == edited_hash
    assert packet.call_id == sent.call_id
    diff = [{"field": "amount_cents", "before": 125000, "after": 100000}]
    card = json.loads(ok(pipeline.cli("approvals", "show", second, "--json")).stdout)
    assert card["edit"] == {"edited_from": approval_id, "edited_by": "alice", "diff": diff}
    card = json.loads(ok(pipeline.cli("approvals", "show", approval_id, "--json")).stdout)
    assert (card["status"], card["edit"]) == ("EDITED", {"edited_by": "alice", "edited_into": second})
    votes = "SELECT approver_id, verdict FROM toolgate.approval_decisions WHERE approval_id = %s"
    assert pipeline.sql(votes, (second,)) == [("alice", "APPROVE")]  # the editor, counted once
    assert _ledger_for(pipeline, key) == []
    again = pipeline.cli("approvals", "approve", second, "--as", "alice", "--json")  # not twice
    assert json.loads(again.stdout)["judgment"]["code"] == "already_decided", said(again)
    approvers = Approvers(pipeline)
    try:
        bob = approvers.decide(packet, "bob")
        assert decision_audit(pipeline, bob.decision_id) == ("decision_counted", "APPROVED")
    finally:
        approvers.close()
    final = pipeline.wait(sent)
    assert (taxonomy(final), errors_of(final)) == ("SUCCESS", [])
    assert read_note(final["result_payload"]["warnings"]) == {
        "approval_id": approval_id,
        "edited_by": "alice",
        "diff": diff,
    }
    [operation] = _ledger_for(pipeline, key)  # once, with the edited amount
    assert operation["response"]["amount_cents"] == 100000
    assert status_of(pipeline, approval_id) == "EDITED"  # nothing ran for the held arguments
    seen = pipeline.client.observations(tenant_id="acme", call_ids=[sent.call_id], idle_timeout=1.5)
    assert len([o for o in seen if o.is_final]) == 1


def test_an_edit_that_widens_is_refused_and_the_ticket_stays_open(pipeline: Pipeline) -> None:
    sent, approval_id, key, charge = held_charge(pipeline)
    wider = pipeline.cli("approvals", "approve", approval_id, "--as", "alice", "--edit", '{"amount_cents": 200000}')
    assert wider.returncode == 1 and "edit_widens_value" in said(wider), said(wider)
    # Signed anyway, past the CLI's check: approval-wait refuses it the same way.
    approvers = Approvers(pipeline)
    try:
        packet = packet_of(pipeline, approval_id)
        wide = canonical_json({**charge, "amount_cents": 200000})
        forced = approvers.forge(packet, "alice", edited_arguments=wide, state_version=packet.state_version)
        assert decision_audit(pipeline, forced.decision_id) == ("decision_refused", "edit_widens_value")
        assert status_of(pipeline, approval_id) == "PENDING"
        assert pipeline.sql("SELECT count(*) FROM toolgate.approvals WHERE edit_of = %s", (approval_id,)) == [(0,)]
        for who in ("alice", "bob"):
            approvers.decide(packet, who, approve=False, reason="edit test")
    finally:
        approvers.close()
    final = pipeline.wait(sent)
    assert taxonomy(final) == "CONFIRMATION_MISSING"
    assert _ledger_for(pipeline, key) == []


def forged_reentry(pipeline: Pipeline, approval_id: str, decision: ApprovalDecision) -> ToolProposal:
    """The held call re-entered with `decision`'s arguments, as approval-wait would re-enter it."""
    [(request,)] = pipeline.sql("SELECT request FROM toolgate.approvals WHERE approval_id = %s", (approval_id,))
    return reentry(codec().decode(bytes(request), StageRecord), decision, int(time.time() * 1000))


def forged_decision(packet: ApprovalRequest, arguments: dict[str, Any], **changes: Any) -> ApprovalDecision:
    now = int(time.time() * 1000)
    fields: dict[str, Any] = {
        "decision_id": f"dec_{uuid.uuid4().hex}",
        "approval_id": packet.approval_id,
        "decision": Verdict.APPROVE,
        "approver_id": "alice",
        "tool_name": packet.tool_name,
        "tool_version": packet.tool_version,
        "payload_hash": packet.payload_hash,
        "decided_at_ms": now,
        "expires_at_ms": now + 300_000,
        "edited_arguments": canonical_json(arguments),
        "state_version": packet.state_version,
        "signature": b"",
    }
    key = changes.pop("key", None) or new_key()
    return sign(ApprovalDecision(**{**fields, **changes}), key)


def test_a_forged_re_entry_is_dead_lettered_and_nothing_runs(pipeline: Pipeline) -> None:
    sent, approval_id, key, charge = held_charge(pipeline)
    packet = packet_of(pipeline, approval_id)
    narrower = {**charge, "amount_cents": 1000}
    # An edit decision alice never signed (another key), re-entered by whoever can write proposals.
    unsigned = forged_decision(packet, narrower)
    publish_proposal(pipeline, forged_reentry(pipeline, approval_id, unsigned))
    # alice's real signature, but over another call's payload: the held ticket was never edited by it.
    other_sent, other_id, other_key, _ = held_charge(pipeline)
    other = packet_of(pipeline, other_id)
    approvers = Approvers(pipeline)
    try:
        real = forged_decision(other, narrower, key=approvers.keyring.load("alice"))
        publish_proposal(pipeline, forged_reentry(pipeline, approval_id, real))
        codes = {"edit_bad_signature", "edit_not_accepted"}
        refused = eventually(lambda: {c for _, _, c, _ in audit_rows(pipeline, sent.call_id) if c in codes} == codes)
        assert refused
        letters = eventually(lambda: len(dead_letters(pipeline, sent.call_id)) == 2)
        assert letters
        assert status_of(pipeline, approval_id) == "PENDING"
        assert pipeline.sql("SELECT count(*) FROM toolgate.approvals WHERE edit_of = %s", (approval_id,)) == [(0,)]
        for held in (packet, other):
            for who in ("alice", "bob"):
                approvers.decide(held, who, approve=False, reason="forgery test")
    finally:
        approvers.close()
    for s in (sent, other_sent):
        assert taxonomy(pipeline.wait(s)) == "CONFIRMATION_MISSING"
    assert _ledger_for(pipeline, key) == [] and _ledger_for(pipeline, other_key) == []


def edited_while_validation_waits(pipeline: Pipeline, change: str) -> tuple[Any, str, str, str]:
    """A charge held for two approvals, edited by a new approver of its own while validation is
    paused: approval-wait accepts the edit (the ticket closes EDITED) and re-enters the edited
    call, and the operator's `toolgate approvers CHANGE EDITOR` happens before validation takes
    it. (the call, its held ticket, its idempotency key, the editor)"""
    editor = f"edna-{uuid.uuid4().hex[:6]}"
    grant = ["--tenant", "acme", "--groups", "finance-controllers", "--risk-classes", "CRITICAL_MUTATION"]
    ok(pipeline.cli("approvers", "add", editor, *grant))
    sent, approval_id, key, charge = held_charge(pipeline)
    pipeline.sql("UPDATE demo.invoices SET amount_cents = 100000 WHERE invoice_id = %s", (charge["invoice_id"],))
    validation = pipeline.worker_pid("validation")
    os.kill(validation, signal.SIGSTOP)
    try:
        edited = pipeline.cli("approvals", "approve", approval_id, "--as", editor, "--edit", '{"amount_cents": 100000}')
        ok(edited)
        assert status_of(pipeline, approval_id) == "EDITED"
        ok(pipeline.cli("approvers", change, editor))
    finally:
        os.kill(validation, signal.SIGCONT)
    return sent, approval_id, key, editor


def approved_by_bob_once_edited(pipeline: Pipeline, approval_id: str, editor: str) -> None:
    """The edited call re-entered, was proven and is held again with its editor counted; bob approves it."""
    second = edited_ticket(pipeline, approval_id)
    votes = "SELECT approver_id FROM toolgate.approval_decisions WHERE approval_id = %s"
    assert pipeline.sql(votes, (second,)) == [(editor,)]
    approvers = Approvers(pipeline)
    try:
        approvers.decide(packet_of(pipeline, second), "bob")
    finally:
        approvers.close()


def test_an_edit_whose_approver_is_revoked_before_it_re_enters_still_gets_one_answer(pipeline: Pipeline) -> None:
    """Approval-wait accepted the edit while its approver was active; validation takes the
    re-entry only after the approver was revoked. Postgres holds the acceptance, so the re-entry is
    proven and the call answered once; its own ticket counts a revoked editor nowhere that runs
    anything (execution counts active approvers only)."""
    sent, approval_id, key, editor = edited_while_validation_waits(pipeline, "revoke")
    approved_by_bob_once_edited(pipeline, approval_id, editor)
    final = pipeline.wait(sent, timeout=60.0)
    assert taxonomy(final) != "SUCCESS" and _ledger_for(pipeline, key) == []  # a revoked editor runs nothing
    seen = pipeline.client.observations(tenant_id="acme", call_ids=[sent.call_id], idle_timeout=1.5)
    assert len([o for o in seen if o.is_final]) == 1


def test_an_edit_whose_approver_key_is_rotated_before_it_re_enters_runs_once(pipeline: Pipeline) -> None:
    """As above, but the editor's key is rotated, not revoked: the edit decision no longer
    verifies under the key the editor has now. It verified under the key approval-wait counted it
    with, which toolgate.approval_decisions keeps with the decision; the re-entry is proven by
    that, the editor (still active) counts once on the edited call's ticket, and with bob's
    approval the call runs once with the edited amount."""
    sent, approval_id, key, editor = edited_while_validation_waits(pipeline, "rotate")
    approved_by_bob_once_edited(pipeline, approval_id, editor)
    final = pipeline.wait(sent, timeout=60.0)
    assert (taxonomy(final), errors_of(final)) == ("SUCCESS", [])
    [operation] = _ledger_for(pipeline, key)
    assert operation["response"]["amount_cents"] == 100000
    assert dead_letters(pipeline, sent.call_id) == []

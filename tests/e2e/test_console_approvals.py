"""The approval console in a real headless Chromium, on the session's `toolgate up` (issue 52,
parts 1 and 2): approvers enrol from invitations (their browsers make their keys, which cannot be
exported), two of them approve a charge in their browsers and it runs exactly once; a denial
needs a reason and ends the call; an expiry is seen live; hostile agent text is inert on a card;
and a console server that signs decisions itself (its own key, or none) approves nothing, each of
its decisions listed on the card's history as proving nobody."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from playwright.sync_api import expect

from toolgate.console.app import Publisher
from toolgate.kafka_security import APPROVALS
from toolgate.schemas.models import ApprovalDecision
from toolgate.trust.signing import decision_document, new_key, sign

from ..conftest import Pipeline
from .console_browser import Approver, approve, browser, console_base, deny, exported, open_card, pair, post
from .test_gates import decision_audit, packet_of, status_of
from .test_pipeline import _approval_of, _ledger_for, errors_of, taxonomy

__all__ = ["browser", "pair"]
pytestmark = pytest.mark.timeout(300)
CHARGE = {"amount_cents": 125000, "currency": "USD"}


def held_charge(pipeline: Pipeline, **kwargs: object) -> tuple[object, str, str]:
    key = f"charge-{uuid.uuid4().hex}"
    sent = pipeline.propose(
        "payment.charge_card", {**CHARGE, "invoice_id": pipeline.open_invoice()}, idempotency_key=key, **kwargs
    )
    return sent, _approval_of(pipeline, sent), key


def test_enrolment_registers_only_the_public_half_of_a_key_the_browser_cannot_export(
    pipeline: Pipeline, pair: tuple[Approver, Approver]
) -> None:
    pat, _ = pair
    [(tenants, groups, classes, key)] = pipeline.sql(
        "SELECT tenants, groups, risk_classes, public_key FROM toolgate.approvers WHERE approver_id = %s", (pat.name,)
    )
    assert (tenants, groups) == (["acme"], ["billing-leads", "finance-controllers"])
    assert sorted(classes) == ["CRITICAL_MUTATION", "HIGH_RISK_EXTERNAL"] and len(bytes(key)) == 32
    assert exported(pat.page, pat.name) == "false:InvalidAccessError"
    audited = pipeline.sql(
        "SELECT action, actor, detail::text FROM toolgate.audit_log WHERE stage = 'registry' "
        "AND detail->>'approver' = %s ORDER BY id",
        (pat.name,),
    )
    assert [(a, actor.split(":")[0]) for a, actor, _ in audited] == [
        ("approver_invited", "operator"),
        ("approver_registered", "invitation"),
    ]
    assert audited[0][2].count("token_sha256_prefix") == 1 and "enrol#" not in audited[0][2]


def test_two_approvers_approve_a_charge_in_their_browsers_and_it_runs_once(
    pipeline: Pipeline, pair: tuple[Approver, Approver]
) -> None:
    pat, quinn = pair
    pat.page.goto(console_base(pipeline) + "/")
    pat.page.evaluate("window.__same_page = true")
    sent, approval_id, key = held_charge(pipeline)
    row = pat.page.locator(f"tr[data-approval-id='{approval_id}']")
    expect(row).to_be_visible(timeout=20_000)  # live: no reload
    assert pat.page.evaluate("window.__same_page") is True
    expect(row).to_contain_text("0 of 2")
    expect(pat.page.get_by_role("status")).to_contain_text("Inbox updated")  # said to a screen reader
    for who in (pat, quinn):
        open_card(who.page, console_base(pipeline), approval_id)
    approve(pat.page, pat.name)
    expect(pat.page.locator("#approve")).to_have_count(0)  # one vote each: the forms are gone
    expect(quinn.page.locator("#votes")).to_contain_text(f"{pat.name}: APPROVE", timeout=20_000)  # live
    pat.page.goto(console_base(pipeline) + "/")
    expect(row).to_contain_text("1 of 2, yours counted")
    approve(quinn.page, quinn.name)
    final = pipeline.wait(sent)
    assert (taxonomy(final), errors_of(final)) == ("SUCCESS", [])
    [charge] = _ledger_for(pipeline, key)
    assert charge["kind"] == "charge"
    decided = "SELECT approver_id FROM toolgate.approval_decisions WHERE approval_id = %s ORDER BY approver_id"
    assert pipeline.sql(decided, (approval_id,)) == sorted([(pat.name,), (quinn.name,)])
    expect(quinn.page.locator("#card-status")).to_have_text("APPROVED", timeout=20_000)
    time.sleep(2.0)
    assert len(_ledger_for(pipeline, key)) == 1


def test_a_denial_needs_a_reason_and_ends_the_call(pipeline: Pipeline, pair: tuple[Approver, Approver]) -> None:
    pat, _ = pair
    sent, approval_id, key = held_charge(pipeline)
    open_card(pat.page, console_base(pipeline), approval_id)
    pat.page.locator("#deny").click()  # the browser asks for the reason first
    assert status_of(pipeline, approval_id) == "PENDING"
    answer = post(pat.page, f"/approvals/{approval_id}/prepare", {"verdict": "DENY", "reason": "  "})
    assert answer == (400, "a denial needs a reason")
    pat.page.locator("#deny-reason").focus()  # by keyboard alone: the reason, then Tab to Deny
    pat.page.keyboard.type("The customer disputes this invoice")
    pat.page.keyboard.press("Tab")
    expect(pat.page.locator("#deny")).to_be_focused()
    pat.page.keyboard.press("Enter")
    expect(pat.page.locator("#votes")).to_contain_text(f"{pat.name}: DENY", timeout=20_000)
    final = pipeline.wait(sent)
    assert taxonomy(final) == "CONFIRMATION_MISSING"
    assert pipeline.sql(
        "SELECT verdict, reason FROM toolgate.approval_decisions WHERE approval_id = %s", (approval_id,)
    ) == [("DENY", "The customer disputes this invoice")]
    expect(pat.page.locator("#card-status")).to_have_text("DENIED", timeout=20_000)
    assert _ledger_for(pipeline, key) == []


def test_an_expiry_is_seen_live(pipeline: Pipeline, pair: tuple[Approver, Approver]) -> None:
    _, quinn = pair
    sent, approval_id, key = held_charge(pipeline, deadline_ms=int((time.time() + 8) * 1000))
    base = console_base(pipeline)
    open_card(quinn.page, base, approval_id)
    quinn.page.evaluate("window.__same_page = true")
    expect(quinn.page.locator("#card-status")).to_have_text("PENDING")
    expect(quinn.page.locator(".countdown")).to_contain_text("s)")
    expect(quinn.page.locator("#card-status")).to_have_text("AUTO_DENIED", timeout=30_000)
    assert quinn.page.evaluate("window.__same_page") is True
    expect(quinn.page.locator("#approve")).to_have_count(0)
    assert taxonomy(pipeline.wait(sent)) == "CONFIRMATION_MISSING"
    assert _ledger_for(pipeline, key) == []


HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


def test_hostile_agent_text_is_inert_on_the_card(pipeline: Pipeline, pair: tuple[Approver, Approver]) -> None:
    pat, _ = pair
    email = {"to": "ap@coyote.example", "subject": f"Invoice {HOSTILE}", "body": f"Pay now {HOSTILE}\u202eexe.pdf"}
    sent = pipeline.propose("notify.send_email", email)
    approval_id = _approval_of(pipeline, sent)
    pat.page.goto(console_base(pipeline) + "/")
    expect(pat.page.locator(f"tr[data-approval-id='{approval_id}']")).to_be_visible(timeout=20_000)
    open_card(pat.page, console_base(pipeline), approval_id)
    card = pat.page.locator("#card-body")
    expect(card).to_contain_text("<script>window.__pwned = 1</script>")
    expect(card).to_contain_text("\\u202e")  # the bidi override shown as its escape
    assert card.locator("script, img").count() == 0
    assert pat.page.evaluate("window.__pwned") is None
    deny(pat.page, pat.name, "not to a stranger")
    assert taxonomy(pipeline.wait(sent)) == "CONFIRMATION_MISSING"


def test_a_console_that_signs_decisions_itself_approves_nothing(
    pipeline: Pipeline, pair: tuple[Approver, Approver]
) -> None:
    """A compromised console has the console's connections (the broker as the approval service,
    Postgres) but no approver's key: what it signs with a key of its own, or leaves unsigned, is
    refused by approval-wait, and nothing runs. The console's own server refuses it too."""
    pat, quinn = pair
    sent, approval_id, key = held_charge(pipeline)
    packet = packet_of(pipeline, approval_id)
    publish = Publisher(pipeline.settings, pipeline.kafka(APPROVALS))  # as the console connects
    forged: list[ApprovalDecision] = []
    for who in (pat.name, quinn.name):
        document = decision_document(packet, who, True, None, f"dec_{uuid.uuid4().hex}", int(time.time() * 1000))
        forged.append(sign(document, new_key()))
        forged.append(document.model_copy(update={"decision_id": f"dec_{uuid.uuid4().hex}"}))  # unsigned
    try:
        for decision in forged:
            publish(decision, packet)
    finally:
        publish.close()
    for decision in forged:
        assert decision_audit(pipeline, decision.decision_id) == ("decision_refused", "bad_signature")
    assert status_of(pipeline, approval_id) == "PENDING"
    assert pipeline.sql("SELECT count(*) FROM toolgate.approval_decisions WHERE approval_id = %s", (approval_id,)) == [
        (0,)
    ]
    open_card(pat.page, console_base(pipeline), approval_id)
    history = pat.page.locator("ol.history li")
    for who in (pat.name, quinn.name):  # the card's history lists each, its signer only claimed
        forgery = f"a decision signed as {who} (APPROVE) proved nobody: bad_signature"
        expect(history.filter(has_text=forgery)).to_have_count(2)
    prepared = post(pat.page, f"/approvals/{approval_id}/prepare", {"verdict": "APPROVE"})
    assert prepared[0] == 200, prepared
    document = json.loads(prepared[1])["document"]
    refused = post(pat.page, f"/approvals/{approval_id}/decide", {"document": document, "signature": "A" * 86})
    assert refused == (403, "refused: the signature does not verify with your registered key")
    time.sleep(2.0)
    assert status_of(pipeline, approval_id) == "PENDING" and _ledger_for(pipeline, key) == []
    deny(pat.page, pat.name, "forged approvals seen")
    assert taxonomy(pipeline.wait(sent)) == "CONFIRMATION_MISSING"

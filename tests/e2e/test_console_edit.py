"""Approve with edit in the approval console, in a real headless Chromium, on the session's
`toolgate up` (issue 52, part 3 through part 1): an approver edits a held charge's amount down in
her browser, sees the difference, signs it with her key; the ticket closes EDITED and its card
links the edited call's own ticket, which another approver approves in his browser; the charge
runs once with the edited amount and the agent's observation says who edited it and how. An edit
that widens, or fails the contract, is refused on the card with its typed reason before anything
is signed (and by the console's server if signed anyway); the ticket stays open and nothing runs."""

from __future__ import annotations

import json
import time

import pytest
from playwright.sync_api import expect

from toolgate.contracts.edits import read_note

from ..conftest import Pipeline
from .console_browser import Approver, approve, browser, console_base, deny, open_card, pair, post
from .test_approve_with_edit import edited_ticket, held_charge
from .test_approver_tenants import ok
from .test_gates import packet_of, status_of
from .test_pipeline import _ledger_for, errors_of, taxonomy

__all__ = ["browser", "pair"]
pytestmark = pytest.mark.timeout(300)
FIELD = "Arguments to approve, as JSON"


def test_an_edit_that_narrows_in_the_browser_runs_once_with_the_edited_amount(
    pipeline: Pipeline, pair: tuple[Approver, Approver]
) -> None:
    edna, fred = pair
    sent, approval_id, key, charge = held_charge(pipeline)
    # The invoice was credited down while the charge waited: the approver charges what is owed.
    pipeline.sql("UPDATE demo.invoices SET amount_cents = 100000 WHERE invoice_id = %s", (charge["invoice_id"],))
    base = console_base(pipeline)
    open_card(edna.page, base, approval_id)
    page = edna.page
    field = page.get_by_label(FIELD)  # labelled, filled with the held arguments
    assert json.loads(field.input_value()) == charge
    field.fill(json.dumps({**charge, "amount_cents": 100000}, indent=2))
    page.keyboard.press("Tab")  # by keyboard: the field, Tab to "Check the edit", Enter
    expect(page.locator("#edit-check")).to_be_focused()
    page.keyboard.press("Enter")
    diff = page.get_by_role("table", name="What your edit changes")
    expect(diff).to_contain_text("amount_cents")
    expect(diff.locator("tbody tr")).to_have_count(1)
    expect(diff.locator("tbody td")).to_have_text(["125000", "100000"])
    expect(page.locator("#edit-diff-title")).to_be_focused()
    assert status_of(pipeline, approval_id) == "PENDING"  # shown, not yet signed
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="Sign and approve the edited call")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#card-status")).to_have_text("EDITED", timeout=20_000)  # live
    expect(page.locator("#edited")).to_contain_text(f"EDITED by {edna.name}")
    second = edited_ticket(pipeline, approval_id)
    link = page.locator("#edited-into")
    expect(link).to_have_text(second, timeout=30_000)  # the edited call's own ticket, live
    [(edited_by, edited_hash)] = pipeline.sql(
        "SELECT edited_by, edited_payload_hash FROM toolgate.approvals WHERE approval_id = %s", (approval_id,)
    )
    assert edited_by == edna.name
    shown = json.loads(ok(pipeline.cli("approvals", "show", second, "--json")).stdout)  # as `approvals show` knows it
    changed = [{"field": "amount_cents", "before": 125000, "after": 100000}]
    assert shown["edit"] == {"edited_from": approval_id, "edited_by": edna.name, "diff": changed}
    votes = "SELECT approver_id, verdict FROM toolgate.approval_decisions WHERE approval_id = %s"
    assert pipeline.sql(votes, (second,)) == [(edna.name, "APPROVE")]  # the editor, counted once
    link.click()
    expect(page.locator("#edited-from")).to_contain_text(approval_id)
    expect(page.locator("#votes")).to_contain_text(f"{edna.name}: APPROVE")
    expect(page.locator("#approve")).to_have_count(0)  # not twice
    assert _ledger_for(pipeline, key) == []
    open_card(fred.page, base, second)
    expect(fred.page.locator("table.diff")).to_contain_text("100000")
    approve(fred.page, fred.name)
    final = pipeline.wait(sent)
    assert (taxonomy(final), errors_of(final)) == ("SUCCESS", [])
    note = read_note(final["result_payload"]["warnings"])
    assert note == {"approval_id": approval_id, "edited_by": edna.name, "diff": changed}
    [operation] = _ledger_for(pipeline, key)  # once, with the edited amount
    assert operation["response"]["amount_cents"] == 100000
    assert status_of(pipeline, approval_id) == "EDITED" and status_of(pipeline, second) == "APPROVED"
    seen = pipeline.client.observations(tenant_id="acme", call_ids=[sent.call_id], idle_timeout=1.5)
    assert len([o for o in seen if o.is_final]) == 1
    assert packet_of(pipeline, second).payload_hash == edited_hash  # what edna signed is what ran


def test_an_edit_that_widens_is_refused_on_the_card_and_nothing_runs(
    pipeline: Pipeline, pair: tuple[Approver, Approver]
) -> None:
    edna, _ = pair
    sent, approval_id, key, charge = held_charge(pipeline)
    open_card(edna.page, console_base(pipeline), approval_id)
    page = edna.page
    refusal = page.get_by_role("alert")
    for edit, code in (({"amount_cents": 200000}, "edit_widens_value"), ({"currency": "JPY"}, "edit_invalid")):
        page.get_by_label(FIELD).fill(json.dumps(edit))
        page.locator("#edit-check").click()
        expect(refusal).to_contain_text(code)
        expect(page.locator("#edit-result")).to_be_hidden()  # nothing offered to sign
    expect(refusal).to_contain_text("the edited arguments fail the contract's input schema")
    # Signed past the browser's check: the console's server refuses it before anything is published.
    prepared = post(page, f"/approvals/{approval_id}/prepare", {"verdict": "APPROVE", "edit": '{"amount_cents": 1}'})
    assert prepared[0] == 200, prepared
    document = json.loads(prepared[1])["document"]
    wide = json.dumps({**charge, "amount_cents": 200000}, sort_keys=True, separators=(",", ":"))
    answer = post(
        page,
        f"/approvals/{approval_id}/decide",
        {"document": {**document, "edited_arguments": wide}, "signature": "A" * 86},
    )
    assert answer[0] == 422 and answer[1].startswith("edit_widens_value: "), answer
    denial = post(page, f"/approvals/{approval_id}/prepare", {"verdict": "DENY", "reason": "no", "edit": "{}"})
    assert denial[0] == 400, denial
    time.sleep(2.0)
    assert status_of(pipeline, approval_id) == "PENDING"
    assert pipeline.sql("SELECT count(*) FROM toolgate.approvals WHERE edit_of = %s", (approval_id,)) == [(0,)]
    expect(page.locator("#card-status")).to_have_text("PENDING")
    assert _ledger_for(pipeline, key) == []
    deny(page, edna.name, "the amount is disputed")
    assert taxonomy(pipeline.wait(sent)) == "CONFIRMATION_MISSING"
    assert _ledger_for(pipeline, key) == []

"""Approve with edit (issue 52, part 3): the merge, the diff and the narrowing check
(contracts/edits.py), the decision document with an edit (toolgate/trust/signing.py), how
approval-wait judges an edit and re-enters it (workers/approval/edited.py, decision.py), and how
validation proves a re-entered edit (workers/validation/edits.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from tests.unit.factories import registry, stage_record
from tests.unit.test_approval_decision import HASH, KEYS, NOW, approver, decision, ticket
from toolgate.contracts.edits import (
    Change,
    Edited,
    EditRefused,
    diff,
    edited_hash,
    edited_text,
    merged,
    more_approvals,
    note,
    read_note,
    widening,
)
from toolgate.refusal import Refusal
from toolgate.schemas.codec import codec
from toolgate.schemas.hashing import payload_hash
from toolgate.schemas.models import ApprovalDecision, StageDecision, StageRecord, Verdict
from toolgate.schemas.wire import canonical_json
from toolgate.states import StageOutcome, TicketStatus
from toolgate.store.edits import EditedTicket
from toolgate.trust.signing import public_bytes, sign, signed_bytes, verify
from toolgate.workers.approval.decision import (
    Counted,
    Then,
    approval_id_for,
    edit_of,
    judge,
    ticket_of,
    transition,
)
from toolgate.workers.approval.edited import check, editor_vote, reentry, wider
from toolgate.workers.validation.edits import ProvenEdit, prove
from toolgate.workers.validation.identity import Unproven

HELD = {"invoice_id": "inv_acme0002", "amount_cents": 5000, "currency": "USD"}


def charge() -> Any:
    return registry().get("payment.charge_card", "1.0.0")


def edit_decision(arguments: dict[str, Any], name: str = "alice", **overrides: Any) -> ApprovalDecision:
    return decision(name, edited_arguments=canonical_json(arguments), **overrides)


# The merge and the diff.


def test_an_edit_replaces_the_keys_it_names_and_keeps_the_others() -> None:
    assert merged(HELD, {"amount_cents": 3000}) == {**HELD, "amount_cents": 3000}
    assert merged({"a": {"b": 1, "c": 2}}, {"a": {"b": 5}}) == {"a": {"b": 5}}  # a value is replaced whole


@pytest.mark.parametrize("edit", [[1], "x", 3, None])
def test_an_edit_is_an_object(edit: Any) -> None:
    assert merged(HELD, edit) == Refusal("edit_not_an_object", "an edit is a JSON object of the arguments it changes")


@pytest.mark.parametrize(
    ("before", "after", "changes"),
    [
        (HELD, HELD, []),
        (HELD, {**HELD, "amount_cents": 3000}, [Change("amount_cents", 5000, 3000)]),
        ({"to": ["a", "b"]}, {"to": ["a", "c"]}, [Change("to[1]", "b", "c")]),
        ({"to": ["a", "b"]}, {"to": ["a"]}, [Change("to", ["a", "b"], ["a"])]),
        ({"m": {"x": 1}}, {"m": {"x": 1, "y": 2}}, [Change("m.y", None, 2)]),
        ({"a": 1}, {"a": 1.0}, [Change("a", 1, 1.0)]),  # another JSON type is a change
        ({"a": 1, "b": 2}, {"b": 3, "c": 4}, [Change("a", 1, None), Change("b", 2, 3), Change("c", None, 4)]),
    ],
)
def test_the_diff_names_every_changed_leaf_in_order(before: Any, after: Any, changes: list[Change]) -> None:
    assert diff(before, after) == changes


# Only narrowing.


@pytest.mark.parametrize(
    ("edit", "code"),
    [
        ({}, "edit_unchanged"),
        ({"amount_cents": 5000}, "edit_unchanged"),
        ({"amount_cents": 5001}, "edit_widens_value"),
        ({"currency": "EUR"}, "edit_widens_value"),  # money:EUR was not spent by the held call
        ({"amount_cents": 0}, "edit_invalid"),  # the contract's minimum is 1
        ({"amount_cents": "3000"}, "edit_invalid"),
        ({"surprise": True}, "edit_invalid"),  # additionalProperties: false
        ({"amount_cents": 3000}, None),
        ({"amount_cents": 1}, None),
        ({"invoice_id": "inv_acme0003"}, None),  # not a spent value: validation and policy judge it
    ],
)
def test_an_edit_may_only_narrow(edit: dict[str, Any], code: str | None) -> None:
    after = merged(HELD, edit)
    assert isinstance(after, dict)
    widens = widening(charge(), HELD, after)
    assert (widens.code if widens else None) == code


def test_policy_may_not_ask_more_approvals_of_the_edited_call() -> None:
    assert more_approvals(2, 2) is None and more_approvals(2, 1) is None
    refused = more_approvals(1, 2)
    assert refused is not None and refused.code == "edit_needs_more_approvals"


def test_what_an_approver_signs_is_the_merged_canonical_json() -> None:
    assert edited_text(HELD, {"amount_cents": 3000}, charge()) == canonical_json({**HELD, "amount_cents": 3000})
    with pytest.raises(EditRefused) as refused:
        edited_text(HELD, {"amount_cents": 9000}, charge())
    assert refused.value.code == "edit_widens_value"
    with pytest.raises(EditRefused) as unchanged:
        edited_text(HELD, {"amount_cents": 5000})  # no contract: still refused, it changes nothing
    assert unchanged.value.code == "edit_unchanged"


def test_the_note_round_trips_through_the_warnings() -> None:
    said = note("appr_1", "alice", [Change("amount_cents", 5000, 3000)])
    assert said.startswith("edited: ")
    assert read_note(["other", said]) == {
        "approval_id": "appr_1",
        "edited_by": "alice",
        "diff": [{"field": "amount_cents", "before": 5000, "after": 3000}],
    }
    assert read_note(["other"]) is None


# The decision document with an edit.


def test_the_edited_arguments_are_signed_and_absent_when_null() -> None:
    plain = decision()
    assert b"edited_arguments" not in signed_bytes(plain)  # decisions signed before the field still verify
    edited = edit_decision({**HELD, "amount_cents": 3000})
    assert b'"edited_arguments"' in signed_bytes(edited)
    assert verify(edited, public_bytes(KEYS["alice"]))
    tampered = edited.model_copy(update={"edited_arguments": canonical_json({**HELD, "amount_cents": 1})})
    assert not verify(tampered, public_bytes(KEYS["alice"]))
    assert codec().decode(codec().encode(edited), ApprovalDecision) == edited


# Approval-wait: judging an edit.


def held_record() -> StageRecord:
    digest = "sha256:" + "a" * 64  # what the agent's signature proved when the held call was admitted
    return stage_record(
        charge(), dict(HELD), payload_hash=payload_hash(HELD), required_approvals=2, proposal_digest=digest
    )


@pytest.mark.parametrize(
    ("edit", "status", "code"),
    [
        ({**HELD, "amount_cents": 3000}, TicketStatus.EDITED, None),
        ({**HELD, "amount_cents": 9000}, None, "edit_widens_value"),
        (HELD, None, "edit_unchanged"),
    ],
)
def test_approval_wait_counts_an_edit_only_when_it_narrows(
    edit: dict[str, Any], status: TicketStatus | None, code: str | None
) -> None:
    d = edit_decision(edit)
    checked = check(d, charge(), HELD)
    result = judge(d, ticket(), approver("alice"), NOW, checked)
    if status is None:
        assert isinstance(result, Refusal) and result.code == code  # the ticket stays PENDING
    else:
        assert result == Counted(TicketStatus.EDITED, ("alice",))
        step = transition(d, ticket(), approver("alice"), NOW, checked)
        assert step.then is Then.REENTER and step.ticket is not None and step.ticket.status == TicketStatus.EDITED


def test_an_edit_not_checked_or_a_denial_with_an_edit_is_refused() -> None:
    d = edit_decision({**HELD, "amount_cents": 3000})
    assert judge(d, ticket(), approver("alice"), NOW) == Refusal(
        "edit_unchecked", "the edit was not checked against the call's contract"
    )
    denial = edit_decision({**HELD, "amount_cents": 3000}, verdict=Verdict.DENY)
    result = judge(denial, ticket(), approver("alice"), NOW, check(denial, charge(), HELD))
    assert isinstance(result, Refusal) and result.code == "edit_not_approve"


def test_an_edit_is_judged_like_any_decision_first() -> None:
    d = edit_decision({**HELD, "amount_cents": 3000}, key="mallory")
    result = judge(d, ticket(), approver("alice"), NOW, check(d, charge(), HELD))
    assert isinstance(result, Refusal) and result.code == "bad_signature"


@pytest.mark.parametrize(
    ("text", "code"),
    [("[1]", "edit_not_an_object"), ("{", "edit_not_an_object"), ('{ "amount_cents": 3 }', "edit_not_canonical")],
)
def test_the_edited_arguments_must_be_a_canonical_object(text: str, code: str) -> None:
    d = decision(edited_arguments=text)
    found = check(d, charge(), HELD)
    assert isinstance(found, Refusal) and found.code == code


def test_the_re_entry_is_the_held_call_with_the_edited_arguments() -> None:
    record = held_record()
    edited = {**HELD, "amount_cents": 3000}
    d = edit_decision(edited)
    p = reentry(record, d, NOW)
    call = record.call
    assert (p.call_id, p.run_id, p.principal, p.idempotency_key) == (
        call.call_id,
        call.run_id,
        call.principal,
        call.idempotency_key,
    )
    assert p.arguments == canonical_json(edited) and p.signature is None
    assert p.edit is not None and codec().decode(p.edit, ApprovalDecision) == d


def marked(record: StageRecord, edited: dict[str, Any]) -> StageRecord:
    detail = json.dumps({"approval_id": "appr_1", "edited_by": "alice", "decision_id": "dec_alice"})
    mark = StageDecision(stage="validation", outcome=StageOutcome.EDITED, detail=detail, at_ms=NOW)
    call = record.call.model_copy(update={"arguments": edited, "payload_hash": payload_hash(edited)})
    return record.model_copy(update={"decisions": [*record.decisions, mark], "call": call})


def test_an_edited_call_has_a_ticket_of_its_own_with_its_editor_counted_once() -> None:
    record = held_record()
    edited = marked(record, {**HELD, "amount_cents": 3000})
    assert edit_of(record) is None and edit_of(edited) == {
        "approval_id": "appr_1",
        "edited_by": "alice",
        "decision_id": "dec_alice",
    }
    assert ticket_of(record) == approval_id_for("acme", "call_1")
    assert ticket_of(edited) == approval_id_for("acme", "call_1", edited.call.payload_hash) != ticket_of(record)
    vote = editor_vote(edited, "appr_2", NOW)
    assert (vote["decision_id"], vote["approver_id"], vote["verdict"]) == ("dec_alice.edited", "alice", "APPROVE")
    assert wider(edited, 2) is None
    assert wider(edited, 1) == more_approvals(1, 2)


# Validation: proving a re-entered edit.


def edited_ticket(**overrides: Any) -> EditedTicket:
    """The ticket approval-wait closed EDITED by alice's edit to 3000 (edited_hash, as it records)."""
    accepted = edited_hash(edit_decision({**HELD, "amount_cents": 3000}))
    base = EditedTicket("appr_1", "acme", "call_1", HASH, "dec_alice", b"", accepted)
    return replace(base, **overrides)


def proven(**changes: Any) -> ProvenEdit | Unproven:
    record = held_record()
    edited = {**HELD, "amount_cents": 3000}
    d = changes.pop("decision", edit_decision(edited))
    p = changes.pop("proposal", reentry(record, edit_decision(edited), NOW))
    return prove(
        p,
        d,
        changes.pop("ticket", edited_ticket()),
        changes.pop("held", record),
        changes.pop("approver", approver("alice")),
        changes.pop("bound", record.call.proposal_digest),
    )


def test_a_re_entered_edit_is_proven_by_its_decision_and_the_edited_ticket() -> None:
    found = proven()
    assert isinstance(found, ProvenEdit)
    assert found.digest == held_record().call.proposal_digest and found.edited_by == "alice"
    assert found.proposal.edit is None and found.proposal.principal == held_record().call.principal
    assert read_note([found.note]) == {
        "approval_id": "appr_1",
        "edited_by": "alice",
        "diff": [{"field": "amount_cents", "before": 5000, "after": 3000}],
    }


def test_an_edit_accepted_before_its_approver_was_revoked_still_re_enters() -> None:
    # Dead-lettered, the call would never be answered; it goes on, and execution counts only
    # active approvers on its own ticket.
    assert isinstance(proven(approver=approver("alice", active=False)), ProvenEdit)


def test_an_edit_whose_approver_key_was_rotated_since_it_was_counted_re_enters() -> None:
    # alice's edit was counted under her key then; she has carol's key now. The key kept with the
    # counted decision proves it; without it, the key registered now refuses it.
    rotated = replace(approver("alice"), public_key=public_bytes(KEYS["carol"]))
    kept = edited_ticket(counted_under=public_bytes(KEYS["alice"]))
    assert isinstance(proven(approver=rotated, ticket=kept), ProvenEdit)
    found = proven(approver=rotated)
    assert isinstance(found, Unproven) and found.code == "edit_bad_signature"


def test_an_edit_signed_under_another_key_than_it_was_counted_under_proves_nobody() -> None:
    # Counted under mallory's key (as if), so alice's signature, valid under her key now, is not
    # the decision approval-wait counted.
    kept = edited_ticket(counted_under=public_bytes(KEYS["mallory"]))
    found = proven(ticket=kept)
    assert isinstance(found, Unproven) and found.code == "edit_bad_signature"


def forged_signature() -> ApprovalDecision:
    d = edit_decision({**HELD, "amount_cents": 3000})
    return sign(d, KEYS["mallory"])


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"decision": None}, "edit_not_a_decision"),
        ({"decision": decision()}, "edit_not_a_decision"),  # a plain approval is no edit
        ({"approver": None}, "edit_unknown_approver"),
        ({"decision": forged_signature()}, "edit_bad_signature"),
        ({"ticket": None}, "edit_not_accepted"),
        ({"ticket": edited_ticket(edit_decision_id="dec_other")}, "edit_not_accepted"),
        # The same decision id over other edited arguments (a signer re-using an accepted id):
        # approval-wait recorded the payload it accepted, and only that one re-enters.
        ({"ticket": edited_ticket(edited_payload_hash="sha256:" + "d" * 64)}, "edit_not_accepted"),
        ({"ticket": edited_ticket(edited_payload_hash=None)}, "edit_not_accepted"),
        ({"ticket": edited_ticket(payload_hash="sha256:" + "e" * 64)}, "edit_of_another_call"),
        ({"ticket": edited_ticket(call_id="call_2")}, "edit_of_another_call"),
        ({"approver": approver("alice", tenants=("globex",))}, "edit_approver_not_for_tenant"),
        ({"bound": None}, "edit_original_unproven"),
        ({"bound": "sha256:" + "f" * 64}, "edit_original_unproven"),
    ],
)
def test_a_forged_re_entry_proves_nobody(changes: dict[str, Any], code: str) -> None:
    found = proven(**changes)
    assert isinstance(found, Unproven) and found.code == code


def test_a_re_entry_with_other_arguments_or_identity_proves_nobody() -> None:
    record = held_record()
    d = edit_decision({**HELD, "amount_cents": 3000})
    other_args = reentry(record, d, NOW).model_copy(update={"arguments": canonical_json({**HELD, "amount_cents": 1})})
    found = proven(proposal=other_args, decision=d)
    assert isinstance(found, Unproven) and found.code == "edit_arguments_mismatch"
    for field, value in (("run_id", "run_2"), ("idempotency_key", "other"), ("dry_run", True)):
        moved = reentry(record, d, NOW).model_copy(update={field: value})
        found = proven(proposal=moved, decision=d)
        assert isinstance(found, Unproven) and found.code == "edit_identity_mismatch", field


def test_edited_narrowing_is_an_edited() -> None:
    d = edit_decision({**HELD, "amount_cents": 3000})
    assert check(d, charge(), HELD) == Edited({**HELD, "amount_cents": 3000}, [Change("amount_cents", 5000, 3000)])

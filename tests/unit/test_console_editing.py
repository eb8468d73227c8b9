"""Approve with edit in the console (console/editing.py, console/views.py, the card's template):
the typed edit made into edited arguments with contracts/edits.py's rule, refused with its typed
code before anything is signed, a signed edit checked again, and the card's edit form and its
part in an edit."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from tests.unit.factories import registry
from tests.unit.test_console_views import AT, packet
from toolgate.console.editing import EDIT_MAX, edit_object, prepared, signed_edit_refusal
from toolgate.console.state import templates
from toolgate.console.views import card_view, diff_rows
from toolgate.contracts.edits import Change, EditRefused, edited_text
from toolgate.schemas.wire import canonical_json
from toolgate.store.console_inbox import Card
from toolgate.store.edits import EditState

HELD = {"invoice_id": "inv_acme0002", "amount_cents": 5000, "currency": "USD"}


def charge() -> Any:
    return registry().get("payment.charge_card", "1.0.0")


def refused(text: str) -> str:
    with pytest.raises(EditRefused) as caught:
        prepared(HELD, text, charge())
    return caught.value.code


def test_a_narrowing_edit_is_the_clis_edited_text_and_its_difference() -> None:
    made = prepared(HELD, '{"amount_cents": 3000}', charge())
    assert made.edited_arguments == edited_text(HELD, {"amount_cents": 3000}, charge())
    assert json.loads(made.edited_arguments) == {**HELD, "amount_cents": 3000}
    assert made.changes == [Change("amount_cents", 5000, 3000)]
    whole = json.dumps({**HELD, "amount_cents": 3000}, indent=2)  # the field as the card fills it, edited
    assert prepared(HELD, whole, charge()) == made


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ('{"amount_cents": 9000}', "edit_widens_value"),
        ('{"amount_cents": "3000"}', "edit_invalid"),
        ('{"currency": "JPY"}', "edit_invalid"),
        ('{"amount_cents": 5000}', "edit_unchanged"),
        ("[1, 2]", "edit_not_an_object"),
        ("{amount_cents: 3000}", "edit_not_an_object"),
        ("", "edit_not_an_object"),
        ('{"amount_cents": NaN}', "edit_not_an_object"),  # Python's JSON extension, not JSON
        ("{" + " " * EDIT_MAX + "}", "edit_not_an_object"),
    ],
)
def test_an_edit_that_does_not_only_narrow_is_refused_with_its_code(text: str, code: str) -> None:
    assert refused(text) == code


def test_a_signed_edit_is_checked_again_before_it_is_published() -> None:
    narrower = canonical_json({**HELD, "amount_cents": 3000})
    assert signed_edit_refusal(HELD, narrower, charge()) is None
    wider = canonical_json({**HELD, "amount_cents": 9000})
    assert signed_edit_refusal(HELD, wider, charge()).code == "edit_widens_value"  # type: ignore[union-attr]
    spaced = json.dumps({**HELD, "amount_cents": 3000})
    assert signed_edit_refusal(HELD, spaced, charge()).code == "edit_not_canonical"  # type: ignore[union-attr]
    partial = canonical_json({"amount_cents": 3000})  # not the whole merged object
    assert signed_edit_refusal(HELD, partial, charge()).code == "edit_not_canonical"  # type: ignore[union-attr]
    assert signed_edit_refusal(HELD, "not json", charge()).code == "edit_not_an_object"  # type: ignore[union-attr]
    assert signed_edit_refusal(HELD, "[]", charge()).code == "edit_not_an_object"  # type: ignore[union-attr]


def test_the_difference_is_inert_text() -> None:
    rows = diff_rows([Change("amount_cents", 5000, 3000), Change("note\u202e", None, "<b>x</b>")])
    assert rows == [
        {"field": "amount_cents", "before": "5000", "after": "3000"},
        {"field": "note\\u202e", "before": "absent", "after": '"<b>x</b>"'},
    ]


def test_edit_object_takes_only_an_object() -> None:
    assert edit_object(' {"a": 1} ') == {"a": 1}
    with pytest.raises(EditRefused):
        edit_object("null")


def card(status: str = "PENDING", **changes: Any) -> Card:
    return Card(packet(**changes), status, None, AT, AT + dt.timedelta(minutes=5), True)


def render(view: dict[str, Any], decidable: bool) -> str:
    return templates().get_template("_card.html").render(card={**view, "decidable": decidable})


def test_an_open_card_has_a_labelled_edit_form_filled_with_the_held_arguments() -> None:
    arguments = {"subject": "<b>hi</b>\u202e", "body": "x"}
    view = card_view(card(arguments=arguments), [])
    html = render(view, True)
    assert '<label for="edit-arguments">' in html and 'id="edit-arguments"' in html
    assert 'id="edit-check"' in html and 'role="alert"' in html
    assert "<b>" not in html and "\u202e" not in html
    assert json.loads(view["arguments_text"]) == arguments  # the field parses to the held arguments
    assert json.loads(view["arguments_json"]) == arguments  # for the browser's own check of what it signs
    assert view["arguments_json"] == canonical_json(arguments).replace("\u202e", "\\u202e")
    assert 'id="edit-arguments"' not in render(view, False)


def test_an_edited_ticket_says_edited_and_links_the_edited_calls_ticket() -> None:
    state = EditState("alice", "appr_" + "b" * 16, None, None, None)
    html = render(card_view(card("EDITED"), [], state), False)
    assert "EDITED by alice" in html and 'href="/approvals/appr_bbbbbbbbbbbbbbbb"' in html
    assert "data-awaiting-link" not in html
    waiting = render(card_view(card("EDITED"), [], EditState("alice", None, None, None, None)), False)
    assert "data-awaiting-link" in waiting and "href=" not in waiting.split('id="edited"')[1].split("</p>")[0]


def test_an_edited_calls_ticket_names_where_it_was_edited_from_and_the_difference() -> None:
    held = {"subject": "hi", "body": "x"}
    state = EditState(None, None, "appr_" + "c" * 16, "alice", held)
    view = card_view(card(arguments={"subject": "hi", "body": "y"}), [], state)
    assert view["edit"] == {
        "edited_from": "appr_" + "c" * 16,
        "edited_by": "alice",
        "diff": [{"field": "body", "before": '"x"', "after": '"y"'}],
    }
    html = render(view, True)
    assert 'href="/approvals/appr_cccccccccccccccc"' in html and "by alice" in html
    assert card_view(card(), [], EditState(None, None, None, None, None))["edit"] is None

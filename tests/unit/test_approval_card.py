"""The confirmation card shows agent text as written (ops/approvals.py), and an approver's client
signs only a packet whose payload hash is that of the arguments it shows (toolgate/trust/signing.py)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from tests.unit.factories import sample_models
from toolgate.ops.approval_card import card, shown
from toolgate.schemas.hashing import payload_hash
from toolgate.schemas.models import ApprovalRequest
from toolgate.trust.signing import PacketMismatch, check_packet

STATE = {"status": "PENDING", "decided_at": "-", "decisions": []}


def packet(**changes: object) -> ApprovalRequest:
    base: ApprovalRequest = sample_models()[ApprovalRequest]
    p = base.model_copy(update=changes)
    return p.model_copy(update={"payload_hash": payload_hash(p.arguments)})


def render(p: ApprovalRequest, state: dict[str, object] | None = None) -> str:
    out = io.StringIO()
    Console(file=out, width=1000, force_terminal=True, color_system="truecolor").print(card(p, state or STATE))
    return out.getvalue()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[white on white]x[/white on white]", "[white on white]x[/white on white]"),
        ("a\nb", "a\\u000ab"),
        ("\x1b[8mhidden", "\\u001b[8mhidden"),
        ("abc\u202edcba", "abc\\u202edcba"),
        ("zero\u200bwidth", "zero\\u200bwidth"),
        ("line\u2028sep", "line\\u2028sep"),
        ("plain ünïcode ✓", "plain ünïcode ✓"),
    ],
)
def test_shown(text: str, expected: str) -> None:
    assert shown(text) == expected


def test_agent_markup_is_not_styled_anywhere_on_the_card() -> None:
    evil = "[white on white]hidden[/white on white]"
    p = packet(
        approval_id=f"appr_{evil}",
        consequence=f"money moves {evil}",
        arguments={"memo": evil, evil: 1},
        run_id=evil,
        tenant_id=evil,
        trace_id=evil,
        action=evil,
        rejection_path=evil,
        compensation=evil,
        before_state={"status": evil},
    )
    p = p.model_copy(update={"requested_by": p.requested_by.model_copy(update={"user_id": evil, "agent_id": evil})})
    decisions = [{"approver": evil, "verdict": "DENY", "reason": evil, "at": "-"}]
    text = render(p, {**STATE, "decisions": decisions})
    assert text.count("[white on white]hidden[/white on white]") == 15
    assert "\x1b[37;47m" not in text  # never styled white on white


def test_agent_text_adds_no_lines_and_no_control_characters() -> None:
    p = packet(arguments={"memo": "ok\nRisk class        LOW\x1b[8m\u202e"}, consequence="a\r\nb")
    text = render(p)
    assert "\u202e" not in text and "\x1b[8m" not in text
    assert '"ok\\nRisk class        LOW\\u001b[8m\\u202e"' in text
    assert "a\\u000d\\u000ab" in text


def test_check_packet_recomputes_the_payload_hash() -> None:
    p = packet()
    check_packet(p)  # the hash of what it shows: fine
    shows_other = p.model_copy(update={"arguments": {**p.arguments, "amount_cents": 999_999}})
    with pytest.raises(PacketMismatch, match="not the hash of the arguments it shows"):
        check_packet(shows_other)


def plain(p: ApprovalRequest) -> str:
    out = io.StringIO()
    Console(file=out, width=1000).print(card(p, STATE))
    return out.getvalue()


def test_states_are_shown_as_indented_json() -> None:
    before = {"status": "open", "amount_cents": 125000, "lines": [{"sku": "A-1", "paid": False}], "note": None}
    text = plain(packet(before_state=before, expected_after_state={"status": "paid"}))
    lines = [line.strip("│ ").rstrip() for line in text.splitlines()]
    at = lines.index("Before state      {")
    assert lines[at : at + 12] == [
        "Before state      {",
        '"amount_cents": 125000,',
        '"lines": [',
        "{",
        '"paid": false,',
        '"sku": "A-1"',
        "}",
        "],",
        '"note": null,',
        '"status": "open"',
        "}",
        "Expected after    {",
    ]
    assert "{'status'" not in text and "False" not in text and "None" not in text  # no Python repr
    assert "│ " + " " * 20 + '"amount_cents": 125000,' in text  # indented past the label


def test_agent_text_in_a_state_stays_inert() -> None:
    evil = "[white on white]hidden[/white on white]"
    state = {evil: f"a\nb{evil}\u202e\u2028", "ok": [evil]}
    text = render(packet(before_state=state, expected_after_state=None))
    assert text.count(evil) == 3
    assert len(plain(packet(before_state=state)).splitlines()) == len(
        plain(packet(before_state={"a": "b", "ok": [1]})).splitlines()
    )
    assert "\x1b[37;47m" not in text and "\u202e" not in text and "\u2028" not in text
    assert '"a\\nb[white on white]hidden[/white on white]\\u202e\\u2028"' in text
    assert "Expected after    not declared" in plain(packet(before_state=state, expected_after_state=None))


def test_an_edit_is_shown_on_both_tickets_and_its_text_stays_inert() -> None:
    """The ticket an edit closed names its editor and where the edited call waits; the edited
    call's names the ticket it came from, the editor and each changed argument (issue 52, part 3)."""
    closed = render(packet(), {**STATE, "status": "EDITED", "edit": {"edited_by": "alice", "edited_into": "appr_2"}})
    assert "by alice; the edited call waits as appr_2" in closed
    diff = [
        {"field": "amount_cents", "before": 125000, "after": 100000},
        {"field": "memo", "before": "[b]x[/b]", "after": None},
    ]
    edited = render(packet(), {**STATE, "edit": {"edited_from": "appr_1", "edited_by": "alice", "diff": diff}})
    assert "appr_1 by alice" in edited and "amount_cents: 125000 -> 100000" in edited
    assert '"[b]x[/b]" -> null' in edited  # agent text in a diff is JSON, never markup
    assert "Edit" not in render(packet())

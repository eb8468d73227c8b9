"""The console's card of a held call (console/views.py, console/templates/): everything
`approvals show` has, agent text inert (escaped by the templates, controls and bidi overrides
written as escapes), states as JSON, and a history with the decisions that did not count."""

from __future__ import annotations

import datetime as dt
from typing import Any

from toolgate.console.state import templates
from toolgate.console.views import card_view
from toolgate.store.console_inbox import Card, Uncounted, Vote

AT = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
HOSTILE = '<script>alert(1)</script><img src=x onerror="alert(2)">\u202etxt.exe'


def packet(**changes: Any) -> dict[str, Any]:
    base = {
        "approval_id": "appr_0123456789abcdef",
        "call_id": "call_1",
        "trace_id": "0" * 32,
        "tenant_id": "acme",
        "run_id": "run_1",
        "requested_by": {"agent_id": "agent_x", "user_id": "tester", "scopes": []},
        "tool_name": "notify.send_email",
        "tool_version": "1.0.0",
        "action": "Send an email",
        "consequence": f"Sends {HOSTILE}",
        "arguments": {"subject": HOSTILE, "body": "hi"},
        "before_state": {"status": "open"},
        "risk_class": "HIGH_RISK_EXTERNAL",
        "payload_hash": "sha256:" + "a" * 64,
        "idempotency_fingerprint": "f" * 16,
        "required_approvals": 2,
        "approver_groups": ["finance-controllers"],
        "compensation": "none",
        "rejection_path": "the call ends",
        "created_at_ms": 0,
        "expires_at_ms": 1,
    }
    return {**base, **changes}


def rendered(card: Card, votes: list[Vote]) -> str:
    view = {**card_view(card, votes), "decidable": True}
    return templates().get_template("_card.html").render(card=view)


def test_hostile_agent_text_is_text_on_the_card() -> None:
    card = Card(packet(), "PENDING", None, AT, AT + dt.timedelta(minutes=5), True)
    votes = [Vote("alice", "APPROVE", None, AT)]
    html = rendered(card, votes)
    assert "<script>" not in html and "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "onerror=&#34;alert(2)&#34;" in html or "onerror=\\&#34;alert(2)\\&#34;" in html
    assert "\u202e" not in html and "\\u202e" in html  # the bidi override is shown, not obeyed
    assert '"status": "open"' not in html and "&#34;status&#34;: &#34;open&#34;" in html  # the state as JSON
    assert "alice: APPROVE at 2026-11-30 12:00:00 UTC" in html
    assert "1 of 2 approval(s)" in html
    assert 'data-verdict="DENY"' in html and "required" in html


def test_a_closed_card_has_its_history_and_no_countdown() -> None:
    card = Card(packet(), "AUTO_DENIED", AT + dt.timedelta(minutes=5), AT, AT + dt.timedelta(minutes=5), True)
    view = card_view(card, [])
    assert view["history"] == [
        ("2026-11-30 12:00:00 UTC", "opened: the call is held for approval"),
        ("2026-11-30 12:05:00 UTC", "closed: AUTO_DENIED"),
    ]
    html = templates().get_template("_card.html").render(card={**view, "decidable": False})
    assert "data-expires-at-ms" not in html and 'data-verdict="APPROVE"' not in html


def test_the_history_lists_the_decisions_that_did_not_count_in_order() -> None:
    card = Card(packet(), "APPROVED", AT + dt.timedelta(minutes=4), AT, AT + dt.timedelta(minutes=5), True)
    votes = [
        Vote("alice", "APPROVE", None, AT + dt.timedelta(minutes=1)),
        Vote("bob", "APPROVE", None, AT + dt.timedelta(minutes=4)),
    ]
    uncounted = [
        Uncounted(AT + dt.timedelta(minutes=2), "mallory", False, "APPROVE", "bad_signature", None, False),
        Uncounted(
            AT + dt.timedelta(minutes=3), "alice", True, "APPROVE", "already_decided", "alice decided already", True
        ),
        Uncounted(
            AT + dt.timedelta(seconds=150), "dave", False, "APPROVE", "wrong_group", "dave is in no group reached", True
        ),
    ]
    assert [what for _, what in card_view(card, votes, None, uncounted)["history"]] == [
        "opened: the call is held for approval",
        "alice decided APPROVE",
        "a decision signed as mallory (APPROVE) proved nobody: bad_signature",
        "dave decided APPROVE, not counted (wrong_group: dave is in no group reached)",
        "alice decided APPROVE, again, not counted (already_decided: alice decided already)",
        "bob decided APPROVE",
        "closed: APPROVED",
    ]


def test_a_claimed_signer_is_inert_text_in_the_history() -> None:
    card = Card(packet(), "PENDING", None, AT, AT + dt.timedelta(minutes=5), True)
    forged = Uncounted(AT, HOSTILE, False, "APPROVE", "bad_signature", None, False)
    html = (
        templates().get_template("_card.html").render(card={**card_view(card, [], None, [forged]), "decidable": True})
    )
    assert "<script>" not in html and "\\u202e" in html

"""The console's pure judgments (console/checks.py): invitations, sessions, CSRF, Origin, the
session cookie, and the bytes a login signs; and the card's view of hostile agent text."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pytest

from toolgate.console.checks import (
    cookie_attributes,
    csrf_ok,
    invitation_refusal,
    login_message,
    loopback,
    origin_ok,
    session_alive,
)

NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
SECOND = dt.timedelta(seconds=1)


@dataclass(frozen=True)
class Invitation:
    expires_at: dt.datetime
    used_at: dt.datetime | None = None


@dataclass(frozen=True)
class Session:
    expires_at: dt.datetime
    approver_active: bool = True


@pytest.mark.parametrize(
    ("invitation", "refusal"),
    [
        (Invitation(NOW + SECOND), None),
        (None, "this invitation is not known"),
        (Invitation(NOW + SECOND, used_at=NOW - SECOND), "this invitation has been used already"),
        (Invitation(NOW), "this invitation has expired"),
        (Invitation(NOW - SECOND), "this invitation has expired"),
        (Invitation(NOW - SECOND, used_at=NOW - 2 * SECOND), "this invitation has been used already"),
    ],
)
def test_an_invitation_is_used_once_before_its_expiry(invitation: Invitation | None, refusal: str | None) -> None:
    assert invitation_refusal(invitation, NOW) == refusal


@pytest.mark.parametrize(
    ("session", "alive"),
    [
        (Session(NOW + SECOND), True),
        (Session(NOW), False),
        (Session(NOW - SECOND), False),
        (Session(NOW + SECOND, approver_active=False), False),  # a revoked approver's session ends at once
        (None, False),
    ],
)
def test_a_session_lives_until_its_expiry_while_its_approver_is_active(session: Session | None, alive: bool) -> None:
    assert session_alive(session, NOW) is alive


@pytest.mark.parametrize(
    ("expected", "given", "ok"),
    [
        ("tok-123", "tok-123", True),
        ("tok-123", "tok-124", False),
        ("tok-123", "", False),
        ("tok-123", None, False),
        ("", "", False),  # a session without a token accepts nothing
        ("tok-123", "tok-123 ", False),
    ],
)
def test_a_post_carries_its_sessions_csrf_token(expected: str, given: str | None, ok: bool) -> None:
    assert csrf_ok(expected, given) is ok


OWN = "http://127.0.0.1:8765"


@pytest.mark.parametrize(
    ("origin", "referer", "ok"),
    [
        (OWN, None, True),
        ("http://evil.example", None, False),
        ("http://127.0.0.1:8766", None, False),
        ("http://localhost:8765", None, False),  # another origin, even if the same machine
        ("null", None, False),
        ("http://evil.example", OWN + "/approvals/x", False),  # an Origin is believed over a Referer
        (None, OWN + "/approvals/x", True),
        (None, OWN, True),
        (None, OWN + ".evil.example/", False),
        (None, None, False),
    ],
)
def test_a_post_comes_from_the_consoles_own_origin(origin: str | None, referer: str | None, ok: bool) -> None:
    assert origin_ok(origin, referer, OWN) is ok


@pytest.mark.parametrize(
    ("host", "secure"),
    [("127.0.0.1", False), ("localhost", False), ("::1", False), ("0.0.0.0", True), ("console.acme.example", True)],
)
def test_the_session_cookie_is_httponly_strict_and_secure_off_loopback(host: str, secure: bool) -> None:
    cookie = cookie_attributes(host, 3600)
    assert (cookie.httponly, cookie.samesite, cookie.path, cookie.max_age) == (True, "Strict", "/", 3600)
    assert cookie.secure is secure
    assert loopback(host) is not secure


def test_a_login_signs_the_origin_and_the_challenge_under_a_context_no_decision_starts_with() -> None:
    signed = login_message(OWN, b"\x00\x01challenge")
    assert signed == b"toolgate-console-login\nhttp://127.0.0.1:8765\n\x00\x01challenge"
    assert not signed.startswith(b"{")  # a decision's signed bytes are a JSON object
    assert login_message("http://localhost:8765", b"c") != login_message(OWN, b"c")

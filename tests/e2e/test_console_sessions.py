"""The console's sessions, CSRF and invitations in a real headless Chromium, on the session's
`toolgate up`: the console connects to Postgres as its own role; the cookie's flags; a POST
without the session's CSRF token, with a wrong one, or from another origin is refused; an
expired session and a logged-out one let nothing through; the login is a signed challenge taken
once; a used or an expired invitation is refused."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, expect

from ..conftest import Pipeline
from .console_browser import Approver, browser, console_base, enrolled, invite, log_in, post

__all__ = ["browser"]
pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def sam(pipeline: Pipeline, browser: Browser) -> Iterator[Approver]:
    approver = enrolled(pipeline, browser, "sam")
    yield approver
    approver.context.close()


def test_the_console_connects_as_its_own_role_not_as_the_tables_owner(pipeline: Pipeline, sam: Approver) -> None:
    # sam enrolled through it: its pool is open. As toolgate_console, a console taken over could
    # change no ticket, decision, key or audit row (tests/integration/test_console_role.py).
    roles = pipeline.sql("SELECT DISTINCT usename FROM pg_stat_activity WHERE application_name = 'toolgate-console'")
    assert roles == [("toolgate_console",)]


def test_the_session_cookie_is_httponly_samesite_strict_and_not_secure_on_loopback(sam: Approver) -> None:
    [cookie] = [c for c in sam.context.cookies() if c["name"] == "toolgate_console"]
    assert (cookie["httpOnly"], cookie["sameSite"], cookie["secure"], cookie["path"]) == (True, "Strict", False, "/")
    assert "toolgate_console" not in sam.page.evaluate("document.cookie")


def test_a_post_without_the_csrf_token_or_with_a_wrong_one_is_refused(pipeline: Pipeline, sam: Approver) -> None:
    body = {"verdict": "APPROVE"}
    path = "/approvals/appr_none/prepare"
    assert post(sam.page, path, body, csrf=False) == (403, "refused: missing or wrong CSRF token")
    assert post(sam.page, path, body, csrf="not-the-token") == (403, "refused: missing or wrong CSRF token")
    assert post(sam.page, path, body)[0] == 409  # the token passes; there is no such ticket to decide
    logout = sam.context.request.post(console_base(pipeline) + "/logout", form={"csrf_token": "wrong"})
    assert logout.status == 403
    assert sam.page.goto(console_base(pipeline) + "/") is not None
    expect(sam.page.locator("h1")).to_have_text("Waiting for your decision")  # still logged in


def test_a_post_from_another_origin_is_refused_even_with_the_token(pipeline: Pipeline, sam: Approver) -> None:
    token = sam.page.locator("meta[name=csrf-token]").get_attribute("content")
    assert token
    base = console_base(pipeline)
    for origin in ("http://evil.example", base.replace("127.0.0.1", "localhost")):
        answer = sam.context.request.post(
            base + "/approvals/appr_none/prepare",
            data={"verdict": "APPROVE"},
            headers={"Origin": origin, "X-CSRF-Token": token},
        )
        assert (answer.status, answer.text()) == (
            403,
            "refused: this request does not come from the console's own origin",
        )
    no_origin = sam.context.request.post(
        base + "/login/challenge", data={}, headers={"Origin": "http://evil.example"}
    )  # nor before a session
    assert no_origin.status == 403
    rebound = sam.context.request.get(base + "/", headers={"Host": "evil.example"})
    assert rebound.status == 421  # a DNS rebinding's Host is not answered


def test_an_expired_session_and_a_logged_out_one_let_nothing_through(pipeline: Pipeline, sam: Approver) -> None:
    base = console_base(pipeline)
    pipeline.sql(
        "UPDATE toolgate.console_sessions SET expires_at = now() - interval '1 second' WHERE approver_id = %s",
        (sam.name,),
    )
    sam.page.goto(base + "/")
    expect(sam.page).to_have_url(base + "/login")
    assert sam.context.request.get(base + "/inbox").status == 401
    log_in(sam.page, base, sam.name)  # the key in the browser logs in again
    expect(sam.page.locator("h1")).to_have_text("Waiting for your decision")
    [cookie] = [c["value"] for c in sam.context.cookies() if c["name"] == "toolgate_console"]
    sam.page.get_by_role("button", name="Log out").click()
    expect(sam.page).to_have_url(base + "/login")
    assert [c for c in sam.context.cookies() if c["name"] == "toolgate_console"] == []
    replayed = sam.context.request.get(base + "/inbox", headers={"Cookie": f"toolgate_console={cookie}"})
    assert replayed.status == 401  # the row is gone: the old cookie is nothing
    sessions = "SELECT count(*) FROM toolgate.console_sessions WHERE approver_id = %s AND expires_at > now()"
    assert pipeline.sql(sessions, (sam.name,)) == [(0,)]


def test_a_login_challenge_is_taken_once_and_a_wrong_signature_is_refused(pipeline: Pipeline, sam: Approver) -> None:
    base = console_base(pipeline)
    status, text = post(sam.page, "/login/challenge", {}, csrf=False)
    assert status == 200
    challenge = json.loads(text)["challenge"]
    forged = base64.urlsafe_b64encode(bytes(64)).decode().rstrip("=")
    body = {"approver_id": sam.name, "challenge": challenge, "signature": forged}
    assert post(sam.page, "/login", body, csrf=False)[0] == 403
    assert post(sam.page, "/login", body, csrf=False)[0] == 403  # and the challenge is spent
    assert pipeline.sql(
        "SELECT count(*) FROM toolgate.console_challenges WHERE challenge = decode(%s, 'base64')",
        (base64.b64encode(base64.urlsafe_b64decode(challenge + "=")).decode(),),
    ) == [(0,)]
    sam.page.goto(base + "/")
    expect(sam.page.locator("h1")).to_have_text("Waiting for your decision")


def test_a_used_or_expired_invitation_is_refused(pipeline: Pipeline, browser: Browser) -> None:
    used = enrolled(pipeline, browser, "una")
    suffix = uuid.uuid4().hex[:6]
    try:
        url = invite(pipeline, f"vic-{suffix}")
        context = browser.new_context()
        page = context.new_page()
        page.goto(url)
        expect(page.locator("#enrol")).to_be_enabled(timeout=15_000)
        late = browser.new_context().new_page()  # a second browser with the same link
        late.goto(url)
        expect(late.locator("#enrol")).to_be_enabled(timeout=15_000)
        page.locator("#enrol").click()
        page.wait_for_url(console_base(pipeline) + "/", timeout=15_000)
        late.locator("#enrol").click()
        expect(late.locator("#invitation-text")).to_have_text("Refused: this invitation has been used already")
        late.goto(url)
        expect(late.locator("#invitation-text")).to_have_text("Refused: this invitation has been used already")
        expired = invite(pipeline, f"wyn-{suffix}", "--expires", "1m")
        pipeline.sql(
            "UPDATE toolgate.console_invitations SET expires_at = now() - interval '1 second' WHERE approver_id = %s",
            (f"wyn-{suffix}",),
        )
        late.goto(expired)
        expect(late.locator("#invitation-text")).to_have_text("Refused: this invitation has expired")
        expect(late.locator("#enrol")).to_be_disabled()
        assert pipeline.sql("SELECT count(*) FROM toolgate.approvers WHERE approver_id = %s", (f"wyn-{suffix}",)) == [
            (0,)
        ]
        for token in ("a\u0000b", "x" * 5000):  # no invitation's: refused as such, not a server error
            for path in ("/enrol/check", "/enrol"):
                answer = post(late, path, {"token": token, "public_key": "A" * 43}, csrf=False)
                assert answer == (400, "no invitation token"), (path, answer)
        bad = pipeline.cli("approvers", "invite", "xan", "--tenant", "acme", "--expires", "30d")
        assert bad.returncode == 1 and "a minute to a week" in bad.stdout + bad.stderr
        context.close()
    finally:
        used.context.close()

"""An approver sees what would run, and signs only that (issue 9): agent text on a confirmation
card is inert (no markup, no control characters, no extra lines), and the approver's client
recomputes the payload hash from the arguments the card shows before it signs."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest

from ..conftest import Pipeline
from .test_gates import status_of
from .test_pipeline import _approval_of

pytestmark = pytest.mark.timeout(180)


def held_email(pipeline: Pipeline, **arguments: str) -> str:
    base = {"to": "ap@coyote.example", "subject": "Invoice inv_acme0001", "body": "A friendly reminder."}
    sent = pipeline.propose("notify.send_email", {**base, **arguments}, idempotency_key=f"email-{uuid.uuid4().hex}")
    return _approval_of(pipeline, sent)


def show(pipeline: Pipeline, approval_id: str) -> str:
    shown = subprocess.run(
        [sys.executable, "-m", "toolgate.cli", "approvals", "show", approval_id],
        env={**pipeline.env, "COLUMNS": "1000"},  # no wrapping: each card line on one line
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    return shown.stdout


def test_agent_text_on_a_card_is_shown_as_written(pipeline: Pipeline) -> None:
    subject = "[white on white]Ignore the recipient[/white on white] Invoice inv_acme0001"
    body = "Hello\nRisk class        LOW_RISK_READ  (needs 0 approval(s))"
    approval_id = held_email(pipeline, subject=subject, body=body)
    card = show(pipeline, approval_id)
    assert card.count("[white on white]Ignore the recipient[/white on white]") == 2  # arguments and consequence
    assert 'body: "Hello\\nRisk class        LOW_RISK_READ  (needs 0 approval(s))"' in card  # one line, quoted
    assert [line for line in card.splitlines() if "Risk class" in line and "LOW_RISK_READ" not in line] != []
    assert not [line for line in card.splitlines() if line.lstrip("│ ").startswith("Risk class        LOW")]
    denied = pipeline.cli("approvals", "deny", approval_id, "--as", "carol")
    assert denied.returncode == 0, denied.stdout + denied.stderr


def test_an_approver_never_signs_a_packet_whose_hash_is_not_of_the_arguments_it_shows(pipeline: Pipeline) -> None:
    approval_id = held_email(pipeline)
    # The packet now shows another recipient; its payload hash still binds the original call.
    pipeline.sql(
        "UPDATE toolgate.approvals SET packet = jsonb_set(packet, '{arguments,to}', '\"boss@coyote.example\"') "
        "WHERE approval_id = %s",
        (approval_id,),
    )
    approved = pipeline.cli("approvals", "approve", approval_id, "--as", "carol", "--wait", "5")
    assert approved.returncode == 1, approved.stdout + approved.stderr
    assert "is not the hash of the arguments it shows" in " ".join(approved.stdout.split())
    assert pipeline.sql("SELECT count(*) FROM toolgate.approval_decisions WHERE approval_id = %s", (approval_id,)) == [
        (0,)
    ]
    assert status_of(pipeline, approval_id) == "PENDING"
    pipeline.sql(  # put the packet back, and end the call
        "UPDATE toolgate.approvals SET packet = jsonb_set(packet, '{arguments,to}', '\"ap@coyote.example\"') "
        "WHERE approval_id = %s",
        (approval_id,),
    )
    assert pipeline.cli("approvals", "deny", approval_id, "--as", "carol").returncode == 0

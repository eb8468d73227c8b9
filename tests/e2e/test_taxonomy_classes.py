"""The classes the review found without an end-to-end producer (issue 50, part 5), through the real
broker and Postgres: a provider that keeps failing (DEPENDENCY_UNAVAILABLE), a bulk send that
partly fails (PARTIAL_SUCCESS, answered by execution or, when the provider answered too late, by
reconciliation's status query), and a two-step effect whose second step fails after the first
committed (COMPENSATION_REQUIRED, then its compensation, once). Every observation is checked
against the reference observation schema (conftest)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from toolgate.schemas.hashing import provider_key

from ..conftest import Pipeline
from .compensations import compensate_twice

pytestmark = pytest.mark.timeout(180)

EMAIL = {"to": "ap@coyote.example", "subject": "Reminder", "body": "Please pay."}


def taxonomy(observation: dict[str, Any]) -> str:
    return str(observation["status"]["taxonomy_class"])


def errors_of(observation: dict[str, Any]) -> list[tuple[str | None, str]]:
    return [(e["field"], e["code"]) for e in observation["result_payload"]["errors"]]


class Faults:
    """The demo provider's faults for a block, cleared after it whatever happens."""

    def __init__(self, pipeline: Pipeline, **faults: Any) -> None:
        self.pipeline, self.faults = pipeline, faults

    def __enter__(self) -> None:
        self.pipeline.provider("/_control/faults", self.faults)

    def __exit__(self, *exc: object) -> None:
        self.pipeline.provider("/_control/faults", {})


def approved(pipeline: Pipeline, tool: str, arguments: Any, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
    """Propose a call that needs one approval, approve it as carol, and wait for its final answer."""
    sent = pipeline.propose(tool, arguments, **kwargs)
    interim = pipeline.wait(sent, final=False)
    assert (interim["status"]["code"], taxonomy(interim)) == (202, "CONFIRMATION_MISSING")
    approval_id = str(interim["result_payload"]["data"]["approval"]["approval_id"])
    decided = pipeline.cli("approvals", "approve", approval_id, "--as", "carol")
    assert decided.returncode == 0, decided.stderr
    return sent, pipeline.wait(sent, timeout=60)


def ledger(pipeline: Pipeline, prefix: str) -> list[dict[str, Any]]:
    return [
        op for op in pipeline.provider("/_control/ledger")["operations"] if op["idempotency_key"].startswith(prefix)
    ]


# --- DEPENDENCY_UNAVAILABLE --------------------------------------------------------------------


def test_a_provider_that_keeps_failing_is_dependency_unavailable_retryable_after_its_delay(pipeline: Pipeline) -> None:
    """The provider answers 503 with Retry-After: 2 to every attempt execution makes (send_email
    may make 3): the agent is told DEPENDENCY_UNAVAILABLE, retryable, after the provider's delay,
    and nothing was sent, then or later."""
    key = f"down-{uuid.uuid4().hex}"
    with Faults(pipeline, fail_statuses=[503] * 3, retry_after_s=2):
        sent, final = approved(pipeline, "notify.send_email", EMAIL, idempotency_key=key)
    assert taxonomy(final) == "DEPENDENCY_UNAVAILABLE"
    assert (final["status"]["code"], final["status"]["retryable"], final["status"]["fail_closed"]) == (503, True, False)
    assert errors_of(final) == [(None, "provider_503")]
    feedback = final["result_payload"]["data"]["feedback"]
    assert (feedback["retryable"], feedback["retry_after_ms"]) == (True, 2000)  # what the provider said
    assert feedback["next_action"] == "retry_after_recovery"
    assert final["execution_metadata"]["attempt_number"] == 1
    # Its effect ran longer (3 attempts, 2 s apart) than the tests' 3 s lease: the key stayed
    # execution's until the effect ended, and reconciliation never took it over to run it again.
    time.sleep(3.0)
    assert ledger(pipeline, provider_key("acme", "notify.send_email", "1.0.0", key)) == []
    assert (
        pipeline.sql(
            "SELECT action FROM toolgate.audit_log WHERE stage = 'reconciliation' AND call_id = %s", (sent.call_id,)
        )
        == []
    )
    assert pipeline.sql("SELECT status FROM toolgate.idempotency_keys WHERE idempotency_key = %s", (key,)) == [
        ("FAILED_RETRYABLE",)
    ]


# --- PARTIAL_SUCCESS ---------------------------------------------------------------------------

BOUNCING = "nobody@bounce.example"
MESSAGES = [
    {"to": "ap@coyote.example", "subject": "Invoice due", "body": "A friendly reminder."},
    {"to": BOUNCING, "subject": "Invoice due", "body": "A friendly reminder."},
    {"to": "billing@roadrunner.example", "subject": "Invoice due", "body": "A friendly reminder."},
]


def test_a_bulk_send_that_partly_fails_is_partial_success_with_each_items_result_once(pipeline: Pipeline) -> None:
    key = f"bulk-{uuid.uuid4().hex}"
    with Faults(pipeline, bounce=[BOUNCING]):
        sent, final = approved(pipeline, "notify.send_bulk", {"messages": MESSAGES}, idempotency_key=key)
    assert taxonomy(final) == "PARTIAL_SUCCESS"
    assert (final["status"]["code"], final["status"]["retryable"]) == (207, False)
    results = final["result_payload"]["data"]["results"]
    assert [(r["index"], r["to"], r["ok"]) for r in results] == [
        (0, MESSAGES[0]["to"], True),
        (1, BOUNCING, False),
        (2, MESSAGES[2]["to"], True),
    ]
    assert results[1]["error"]["code"] == "recipient_rejected" and "message_id" not in results[1]
    assert errors_of(final) == [("results[1]", "recipient_rejected")]
    items = ledger(pipeline, provider_key("acme", "notify.send_bulk", "1.0.0", key) + ":")
    assert sorted(op["idempotency_key"].rsplit(":", 1)[1] for op in items) == ["0", "2"]  # the sent, once each
    assert pipeline.sql("SELECT status FROM toolgate.idempotency_keys WHERE idempotency_key = %s", (key,)) == [
        ("COMPLETED",)
    ]
    pipeline.client.resend(sent)  # the same call again: its answer again, nothing sent twice
    again = pipeline.first(sent, lambda o: o["execution_metadata"]["idempotency_hit"] is True)
    assert taxonomy(again) == "PARTIAL_SUCCESS"
    assert again["result_payload"]["data"]["results"] == results
    assert len(ledger(pipeline, provider_key("acme", "notify.send_bulk", "1.0.0", key) + ":")) == 2


def test_a_bulk_answered_too_late_is_settled_partial_success_by_its_status_query(pipeline: Pipeline) -> None:
    """The provider sends the bulk but answers after the call's deadline, and its status query is
    down meanwhile: the outcome is unknown (202, being verified). Once the status query is back,
    reconciliation settles the key as execution would have: PARTIAL_SUCCESS with each item's
    result, each sent item once."""
    key = f"bulk-{uuid.uuid4().hex}"
    with Faults(pipeline, bounce=[BOUNCING], delay_after_ms=6000, status_query_status=503):
        sent = pipeline.propose("notify.send_bulk", {"messages": MESSAGES}, idempotency_key=key)
        interim = pipeline.wait(sent, final=False)
        approval_id = str(interim["result_payload"]["data"]["approval"]["approval_id"])
        assert pipeline.cli("approvals", "approve", approval_id, "--as", "carol").returncode == 0
        verifying = pipeline.first(sent, lambda o: taxonomy(o) == "TIMEOUT")
    assert verifying["status"]["code"] == 202
    final = pipeline.wait(sent, timeout=60, resend=False)
    assert taxonomy(final) == "PARTIAL_SUCCESS"
    assert [r["ok"] for r in final["result_payload"]["data"]["results"]] == [True, False, True]
    assert errors_of(final) == [("results[1]", "recipient_rejected")]
    items = ledger(pipeline, provider_key("acme", "notify.send_bulk", "1.0.0", key) + ":")
    assert sorted(op["idempotency_key"].rsplit(":", 1)[1] for op in items) == ["0", "2"]
    assert (
        pipeline.sql(
            "SELECT action FROM toolgate.audit_log WHERE stage = 'reconciliation' AND call_id = %s", (sent.call_id,)
        )
        != []
    )


# --- COMPENSATION_REQUIRED ---------------------------------------------------------------------

NOTICE = {"title": "Maintenance on Sunday", "body": "The portal is down from 02:00 to 03:00 UTC."}


def test_a_second_step_failing_after_the_first_committed_requires_its_compensation_run_once(
    pipeline: Pipeline,
) -> None:
    with Faults(pipeline, fail_notify=True):
        sent = pipeline.propose("notify.publish_announcement", NOTICE)
        final = pipeline.wait(sent)
    assert taxonomy(final) == "COMPENSATION_REQUIRED"
    assert (final["status"]["fail_closed"], final["status"]["retryable"]) == (True, False)
    data = final["result_payload"]["data"]
    post_id = data["post_id"]
    assert [(s["step"], s["ok"], s.get("error", {}).get("code")) for s in data["steps"]] == [
        ("post", True, None),
        ("notify", False, "mail_relay_down"),
    ]
    assert data["compensation"] == {"tool": "notify.retract_announcement", "arguments": {"post_id": post_id}}
    assert errors_of(final) == [("steps[1]", "mail_relay_down"), ("steps", "compensation_required")]
    assert [op["kind"] for op in ledger(pipeline, f"post:{post_id}")] == ["announcement"]  # the first step stays
    compensate_twice(pipeline, sent.call_id, {"post_id": post_id, "status": "retracted"})
    assert [op["kind"] for op in ledger(pipeline, f"post:{post_id}")] == ["retracted"]
    retractions = [op for op in pipeline.provider("/_control/ledger")["operations"] if op["kind"] == "retraction"]
    assert [op["response"]["post_id"] for op in retractions].count(post_id) == 1
    assert pipeline.sql("SELECT status FROM toolgate.idempotency_keys WHERE call_id = %s", (sent.call_id,)) == [
        ("COMPENSATED",)
    ]

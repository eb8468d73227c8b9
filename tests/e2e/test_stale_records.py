"""Genuine records replayed past their window are never acted on, and never answered (review N2,
N3), through the real broker and Postgres.

A `toolgate up` of this module's own, with short windows so a replay can outlive them in seconds:
records between stages may be 6 s old (TOOLGATE_RECORD_MAX_AGE_SECONDS; 900 by default), and a
proposal's signature 12 s (TOOLGATE_PROPOSAL_MAX_AGE_SECONDS; 900 by default).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from ..conftest import Pipeline, eventually, started
from .replays import carried, drafted, finals, made_ms, one_answer_a_copy, replay, told
from .test_pipeline import _approval_of, taxonomy
from .test_replayed_records import at_least, executions, expire, hit, key_state

pytestmark = pytest.mark.timeout(300)

RECORD_MAX_AGE_S = 6
PROPOSAL_MAX_AGE_S = 12
DRAFT = {
    "customer_id": "cust_acme01",
    "currency": "USD",
    "due_date": "2030-12-31",
    "lines": [{"description": "Stale", "quantity": 1, "unit_amount_cents": 100}],
}


@pytest.fixture(scope="module")
def tight(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pipeline]:
    with started(
        tmp_path_factory.mktemp("tight-home"),
        TOOLGATE_RECORD_MAX_AGE_SECONDS=str(RECORD_MAX_AGE_S),
        TOOLGATE_PROPOSAL_MAX_AGE_SECONDS=str(PROPOSAL_MAX_AGE_S),
    ) as running:
        yield running


def stale_letters(pipeline: Pipeline, source: str) -> list[dict[str, Any]]:
    """The open dead letters of records refused as stale, from `source`."""
    listed = pipeline.cli("dlq", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    letters = json.loads(listed.stdout)
    return [r for r in letters if r["taxonomy_class"] == "STALE_STATE" and r["source"].startswith(f"{source}[")]


def test_a_captured_record_replayed_past_the_bound_is_dead_lettered_and_sent_on_only_when_told(
    tight: Pipeline,
) -> None:
    # The review's attack: a genuine tool.executable batch, its key's TTL over, re-produced.
    key, sent, _, captured, _ = drafted(tight, DRAFT)
    expire(tight, key, "1 second")
    time.sleep(RECORD_MAX_AGE_S + 1)
    before = {letter["dead_letter_id"] for letter in stale_letters(tight, "executable")}

    replayed_ms = int(time.time() * 1000)
    replay(tight, captured)
    time.sleep(3.0)
    # Not acted on, not answered. (Answers before it: the call's, one a copy of it when its client
    # published it again for want of an answer: client/resend.py.)
    assert [o for o in finals(tight, "acme", sent.call_id) if made_ms(o) >= replayed_ms] == []
    assert key_state(tight, key) == [("EXPIRED", "SUCCESS")]
    [letter] = eventually(lambda: [r for r in stale_letters(tight, "executable") if r["dead_letter_id"] not in before])
    assert letter["stage"] == "execution" and "past the bound of 6 s" in letter["reason"]
    assert executions(tight, sent.call_id) == 1
    audited = tight.sql("SELECT detail FROM toolgate.audit_log WHERE stage = 'execution' AND action = 'stale_records'")
    assert any(detail["topic"] == "executable" for (detail,) in audited)

    # An operator's replay of the letter is refused: the record is as stale as it was ...
    refused = tight.cli("dlq", "replay", letter["dead_letter_id"])
    assert refused.returncode != 0 and "stale" in refused.stderr
    # ... unless told: then it goes on stamped anew, and execution answers it from the ledger.
    sent_on_ms = int(time.time() * 1000)
    sent_on = tight.cli("dlq", "replay", letter["dead_letter_id"], "--allow-stale")
    assert sent_on.returncode == 0, sent_on.stderr
    # Each copy of the call the record carries is answered, from the ledger.
    copies = carried(captured, sent.call_id)
    again = eventually(
        lambda: at_least(copies, [o for o in finals(tight, "acme", sent.call_id) if made_ms(o) >= sent_on_ms])
    )
    one_answer_a_copy(again, copies)
    assert all((taxonomy(o), hit(o)) == ("SUCCESS", True) for o in again), told(again)
    assert executions(tight, sent.call_id) == 1
    [(note,)] = tight.sql(
        "SELECT detail->>'note' FROM toolgate.audit_log WHERE action = 'dead_letter_replayed' "
        "AND detail->>'dead_letter_id' = %s",
        (letter["dead_letter_id"],),
    )
    assert note.startswith("stale record sent on by the operator")


def test_a_proposal_replayed_past_its_window_while_its_call_waits_is_never_answered(tight: Pipeline) -> None:
    # The review's N3: a captured charge replayed once its signature is stale, while the call
    # still waits for approval, drew a signed 403 stale_proposal final naming the call's digest.
    invoice = tight.open_invoice()
    sent = tight.propose("payment.charge_card", {"invoice_id": invoice, "amount_cents": 125000, "currency": "USD"})
    approval_id = _approval_of(tight, sent)
    assert sent.record is not None
    time.sleep(PROPOSAL_MAX_AGE_S + 2)
    tight.client.publish_raw(sent.record.topic, sent.record.key, sent.record.value, list(sent.record.headers))
    tight.client.flush()
    time.sleep(3.0)
    assert finals(tight, "acme", sent.call_id) == []  # no false final for the live call
    assert eventually(lambda: copy_dropped(tight, sent.call_id)) == [("stale_proposal",)]
    for approver in ("alice", "bob"):
        assert tight.cli("approvals", "approve", approval_id, "--as", approver).returncode == 0
    [final] = eventually(lambda: finals(tight, "acme", sent.call_id))
    assert taxonomy(final) == "SUCCESS"
    time.sleep(2.0)
    assert len(finals(tight, "acme", sent.call_id)) == 1


def copy_dropped(pipeline: Pipeline, call_id: str) -> list[tuple[Any, ...]]:
    return pipeline.sql(
        "SELECT detail->>'refusal' FROM toolgate.audit_log WHERE call_id = %s AND stage = 'validation' "
        "AND detail->>'code' = 'copy_of_bound_call'",
        (call_id,),
    )

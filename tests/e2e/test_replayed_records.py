"""No record replayed, however genuine, runs an effect twice (review N2, N5), through the real
broker and Postgres.

Each test captures a genuine record off its topic, as anyone who can read toolgate's topics
could, and produces it again byte for byte once what guarded it (the idempotency key's TTL, the
key itself, the approval) is gone. A record older than the freshness bound is refused before it
is read (test_stale_records.py); these replays are fresh, so what holds here is execution's own
memory of the operation: its key's tombstone, and its spent ticket.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from typing import Any

import pytest

from ..conftest import Pipeline, eventually
from .replays import (
    Captured,
    answers,
    capture,
    carried,
    drafted,
    ends,
    finals,
    made_ms,
    one_answer_a_copy,
    replay,
    told,
)
from .test_gate_holes import as_agent, new_tenant
from .test_pipeline import _approval_of, _ledger_for, errors_of, taxonomy

pytestmark = pytest.mark.timeout(240)

DRAFT = {
    "customer_id": "cust_acme01",
    "currency": "USD",
    "due_date": "2030-12-31",
    "lines": [{"description": "Replayed", "quantity": 1, "unit_amount_cents": 100}],
}


def key_state(pipeline: Pipeline, key: str) -> list[tuple[Any, ...]]:
    return pipeline.sql(
        "SELECT status, response->'outcome'->>'taxonomy_class' FROM toolgate.idempotency_keys "
        "WHERE tenant_id = 'acme' AND idempotency_key = %s",
        (key,),
    )


def executions(pipeline: Pipeline, call_id: str) -> int:
    """How many times execution ran the call's effect (audited: the audited tools are)."""
    rows = pipeline.sql(
        "SELECT count(*) FROM toolgate.audit_log WHERE call_id = %s AND stage = 'execution' "
        "AND action IN ('executed', 'failed')",
        (call_id,),
    )
    return int(rows[0][0])


def expire(pipeline: Pipeline, key: str, ago: str) -> None:
    """The key's deduplication window ended `ago`: reconciliation marks it EXPIRED (every second
    in the test session), as it would once its TTL passed."""
    pipeline.sql(
        "UPDATE toolgate.idempotency_keys SET expires_at = now() - %s::interval "
        "WHERE tenant_id = 'acme' AND idempotency_key = %s",
        (ago, key),
    )
    eventually(lambda: key_state(pipeline, key)[0][0] == "EXPIRED")


def hit(observation: dict[str, Any]) -> bool:
    return bool(observation["execution_metadata"]["idempotency_hit"])


def replayed_now(pipeline: Pipeline, captured: Captured) -> int:
    """Replay the captured record; when (ms): every answer to it is made after."""
    replayed_ms = int(time.time() * 1000)
    replay(pipeline, captured)
    return replayed_ms


def ran_once(observations: list[dict[str, Any]]) -> bool:
    """Whether one answer says the write ran and every other says it was answered from the ledger."""
    said = sorted((taxonomy(o), hit(o)) for o in observations)
    return said == [("SUCCESS", False)] + [("SUCCESS", True)] * (len(observations) - 1)


@pytest.mark.parametrize("again", [False, True], ids=["published-once", "published-again"])
def test_a_write_replayed_after_its_key_expired_is_answered_from_the_ledger_never_run(
    pipeline: Pipeline, again: bool
) -> None:
    # `again`: what `wait` does when no answer came within 10 s (client/resend.py), as it did
    # once on the Kafka tier, a napping stage holding the call: the same call again, answered again.
    key, sent, first, captured, proposed = drafted(pipeline, DRAFT, again)
    expire(pipeline, key, "1 second")

    replayed_ms = replayed_now(pipeline, captured)
    seen, given = eventually(lambda: answers(pipeline, sent, proposed, captured))
    one_answer_a_copy(seen, given)
    # The effect ran once; every other answer, to a copy published again or replayed, is its
    # outcome from the ledger.
    assert ran_once(seen), told(seen)
    assert all(o["result_payload"]["data"] == first["result_payload"]["data"] for o in seen), told(seen)
    # Each copy of the call the replayed record carries was answered, after it was replayed.
    assert len([o for o in seen if made_ms(o) >= replayed_ms]) >= carried(captured, sent.call_id), told(seen)
    assert executions(pipeline, sent.call_id) == 1
    assert key_state(pipeline, key) == [("EXPIRED", "SUCCESS")]  # the stored outcome is not overwritten
    assert pipeline.sql("SELECT count(*) FROM demo.invoices WHERE created_by_call = %s", (sent.call_id,)) == [(1,)]


def test_a_write_replayed_once_retention_left_only_its_tombstone_is_refused_never_run(pipeline: Pipeline) -> None:
    key, sent, _, captured, proposed = drafted(pipeline, DRAFT)
    # Forty days past its window: retention (every 2 s in the test session) is past its history.
    # The call's own rows are as old (aged once the key is EXPIRED): its evidence bundle is kept
    # first, then its history goes.
    expire(pipeline, key, "40 days")
    for table in ("calls", "call_decisions"):
        pipeline.sql(
            f"UPDATE toolgate.{table} SET at = now() - interval '40 days' WHERE tenant_id = 'acme' AND call_id = %s",
            (sent.call_id,),
        )
    eventually(lambda: not key_state(pipeline, key) or key_state(pipeline, key)[0][1] is None, timeout=30)
    assert key_state(pipeline, key) == [("EXPIRED", None)]  # a tombstone: no request, no outcome
    kept = "SELECT bundle->'execution'->>'status', bundle->'execution'->>'expired_from' FROM toolgate.evidence_bundles "
    assert pipeline.sql(kept + "WHERE call_id = %s", (sent.call_id,)) == [("EXPIRED", "COMPLETED")]  # kept first

    replayed_ms = replayed_now(pipeline, captured)
    seen, given = eventually(lambda: answers(pipeline, sent, proposed, captured))
    one_answer_a_copy(seen, given)
    refused = [o for o in seen if made_ms(o) >= replayed_ms]
    assert ran_once([o for o in seen if made_ms(o) < replayed_ms]), told(seen)
    # Each copy the replayed record carries is refused: the tombstone keeps the key, not its outcome.
    assert len(refused) >= carried(captured, sent.call_id), told(seen)
    assert all((taxonomy(o), errors_of(o)) == ("STALE_STATE", [(None, "key_expired")]) for o in refused), told(seen)
    assert executions(pipeline, sent.call_id) == 1
    assert pipeline.sql("SELECT count(*) FROM demo.invoices WHERE created_by_call = %s", (sent.call_id,)) == [(1,)]


def forget_at_provider(pipeline: Pipeline, key: str) -> None:
    """The provider's own key window ended (24 h is common): it would take the key as new."""
    ledger = sqlite3.connect(str(pipeline.home / "provider" / "ledger.sqlite3"))
    with ledger:
        for op in _ledger_for(pipeline, key):
            ledger.execute("DELETE FROM operations WHERE idempotency_key = ?", (op["idempotency_key"],))
    ledger.close()


def test_an_approved_email_replayed_once_its_key_is_gone_finds_its_ticket_spent(pipeline: Pipeline) -> None:
    key = f"email-{uuid.uuid4().hex}"
    email = {"to": "ap@coyote.example", "subject": "Replayed", "body": "Sent once."}
    since = ends(pipeline, "executable")
    sent = pipeline.propose("notify.send_email", email, idempotency_key=key)
    approval_id = _approval_of(pipeline, sent)
    assert pipeline.cli("approvals", "approve", approval_id, "--as", "carol").returncode == 0
    assert taxonomy(pipeline.wait(sent)) == "SUCCESS"
    captured = capture(pipeline, "executable", since, sent.call_id)
    # Everything that remembered the operation is gone: its key (past every retention window)
    # and the provider's own record of it.
    pipeline.sql("DELETE FROM toolgate.idempotency_keys WHERE tenant_id = 'acme' AND idempotency_key = %s", (key,))
    forget_at_provider(pipeline, key)

    replayed_ms = replayed_now(pipeline, captured)
    # Each copy the replayed record carries is refused. (Counted from the replay alone: a held
    # call published again while it waits is answered by its approval announced again, not by a
    # final answer of its own.)
    copies = carried(captured, sent.call_id)
    refused = eventually(
        lambda: at_least(copies, [o for o in finals(pipeline, "acme", sent.call_id) if made_ms(o) >= replayed_ms])
    )
    one_answer_a_copy(refused, copies)
    assert all((taxonomy(o), errors_of(o)) == ("CONFIRMATION_MISSING", [(None, "approval_spent")]) for o in refused)
    time.sleep(1.0)
    assert _ledger_for(pipeline, key) == []  # no second email
    assert executions(pipeline, sent.call_id) == 1
    spent = pipeline.sql("SELECT spent_at IS NOT NULL FROM toolgate.approvals WHERE approval_id = %s", (approval_id,))
    assert spent == [(True,)]


def at_least(n: int, found: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    return found if len(found) >= n else None


def test_a_captured_read_replayed_within_its_window_spends_nothing_and_runs_once(pipeline: Pipeline) -> None:
    # invoice.tax_estimate allows 5 calls per 10 s per tenant: six replays used to lock it out.
    tenant, agent = new_tenant(pipeline)
    arguments = {"amount_cents": 1000, "country": "DE"}
    sent = as_agent(pipeline, agent, "invoice.tax_estimate", arguments)
    first = pipeline.wait(sent)
    assert taxonomy(first) == "SUCCESS"
    assert sent.record is not None
    for _ in range(6):
        pipeline.client.publish_raw(sent.record.topic, sent.record.key, sent.record.value, list(sent.record.headers))
    pipeline.client.flush()
    copies = eventually(lambda: at_least(7, finals(pipeline, tenant, sent.call_id)))[1:]
    assert {(taxonomy(o), o["execution_metadata"]["idempotency_hit"]) for o in copies} == {("SUCCESS", True)}
    assert all(o["result_payload"]["data"] == first["result_payload"]["data"] for o in copies)
    assert pipeline.sql("SELECT count(*) FROM toolgate.usage_events WHERE tenant_id = %s", (tenant,)) == [(1,)]
    honest = pipeline.wait(as_agent(pipeline, agent, "invoice.tax_estimate", arguments))
    assert taxonomy(honest) == "SUCCESS"

"""An approver's edited call reaching approval-wait (issue 52, part 3), through the broker, on a
running approval-wait worker and this module's database: validation marked it edited (the
StageDecision `edit_of` reads), the policy stage allowed it for N approvals, and the ticket it
was edited from (EDITED, requiring two) is in Postgres.

* allowed for one approval: its own ticket (named by its payload hash too) is opened with the
  editor's approval counted, APPROVED at once, and the call released to tool.executable; it
  reaches the approver groups the held ticket had reached;
* allowed for three: more than the held call's two, so it is refused
  (`edit_needs_more_approvals`), no ticket is opened, and nothing is released.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from tests.unit.factories import stage_record
from toolgate.contracts.registry import load_registry
from toolgate.ops.stack.embedded import Broker
from toolgate.schemas.codec import codec
from toolgate.schemas.hashing import payload_hash
from toolgate.schemas.models import ExecutionResult, PayloadKind, StageDecision, StageRecord
from toolgate.states import StageOutcome
from toolgate.topics.catalog import Topics
from toolgate.trust.deployment_keys import deployment_keys
from toolgate.trust.integrity import Sealer
from toolgate.workers.approval.decision import approval_id_for
from toolgate.workers.policy.case import Allow
from toolgate.workers.policy.handler import PolicyHandler
from toolgate.workers.runtime.emit import Emit, Origin
from toolgate.workers.runtime.handler import Inbound

from .conftest import Database, with_topics
from .stage_workers import running, worker_env
from .test_policy_approver_groups import TRACE, wait_for

HELD = {"invoice_id": "inv_acme0002", "amount_cents": 125000, "currency": "USD"}
EDITED = {**HELD, "amount_cents": 100000}


def original_ticket(database: Database, call_id: str) -> str:
    """The held call's ticket, closed EDITED by alice, requiring two approvals."""
    approval_id = approval_id_for("acme", call_id)
    database.sql(
        "INSERT INTO toolgate.approvals (approval_id, call_id, tenant_id, run_id, tool_name, tool_version, "
        "payload_hash, risk_class, required_approvals, status, home_partition, request, packet, expires_at, "
        "edited_by, edit_decision_id, approver_groups) VALUES (%s, %s, 'acme', 'run_1', 'payment.charge_card', "
        "'1.0.0', %s, 'CRITICAL_MUTATION', 2, 'EDITED', 0, '\\x00', '{}', now() + interval '10 minutes', "
        "'alice', 'dec_1', '{finance-controllers,finance-directors}')",
        (approval_id, call_id, payload_hash(HELD)),
    )
    return approval_id


def edited_and_allowed(database: Database, broker: Broker, prefix: str, call_id: str, approvals: int) -> None:
    """The edited call as the policy stage publishes it on tool.authorized, allowed for `approvals`."""
    settings = with_topics(database, broker, prefix)
    registry = load_registry()
    charge = registry.resolve("payment.charge_card", "latest")
    detail = json.dumps({"approval_id": approval_id_for("acme", call_id), "edited_by": "alice", "decision_id": "dec_1"})
    mark = StageDecision(stage="validation", outcome=StageOutcome.EDITED, detail=detail, at_ms=int(time.time() * 1000))
    record = stage_record(charge, EDITED, call_id=call_id, traceparent=TRACE, payload_hash=payload_hash(EDITED))
    record = record.model_copy(update={"decisions": [*record.decisions, mark]})
    out = Emit("policy")
    handler = PolicyHandler(registry, settings)  # its pool is never opened: _allow does no I/O
    validated = Origin("validated", 0, 0, None, [], PayloadKind.STAGE_ITEM)
    call = Inbound(record, codec().encode(record), validated, traceparent=TRACE)
    handler._allow(call, Allow(approvals, ()), int(time.time() * 1000), out)
    topics = Topics(prefix)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for r in out.messages(topics, 1_000_000, Sealer(deployment_keys(settings), topics)):
        producer.produce(r.topic, r.value, r.key, partition=r.partition or 0, headers=r.headers)
    assert producer.flush(10) == 0


def outbox_payloads(database: Database, topic: str) -> list[bytes]:
    return [bytes(p) for (p,) in database.sql("SELECT payload FROM toolgate.outbox WHERE topic = %s", (topic,))]


def test_an_edited_call_the_editor_alone_approves_is_released(
    database: Database, broker: Broker, topic_prefix: str, tmp_path: Path
) -> None:
    call_id = f"call_{uuid.uuid4().hex}"
    held = original_ticket(database, call_id)
    env = worker_env(database, broker, topic_prefix, tmp_path, {})
    with running("approval-wait", env):
        edited_and_allowed(database, broker, topic_prefix, call_id, 1)
        own = approval_id_for("acme", call_id, payload_hash(EDITED))
        ticket = "SELECT status, edit_of FROM toolgate.approvals WHERE approval_id = %s AND status = 'APPROVED'"
        assert wait_for(database, ticket, (own,)) == [("APPROVED", held)]
    votes = "SELECT approver_id, verdict FROM toolgate.approval_decisions WHERE approval_id = %s"
    assert database.sql(votes, (own,)) == [("alice", "APPROVE")]
    # The held ticket had been escalated to the directors: the edited call's reaches them too.
    groups = database.sql("SELECT approver_groups FROM toolgate.approvals WHERE approval_id = %s", (own,))
    assert groups == [(["finance-controllers", "finance-directors"],)]
    released = [codec().decode(p, StageRecord) for p in outbox_payloads(database, f"{topic_prefix}tool.executable")]
    mine = [r for r in released if r.call.call_id == call_id]
    assert [(r.call.arguments["amount_cents"], r.approvers) for r in mine] == [(100000, ["alice"])]


def test_an_edited_call_needing_more_approvals_than_the_held_one_is_refused(
    database: Database, broker: Broker, topic_prefix: str, tmp_path: Path
) -> None:
    call_id = f"call_{uuid.uuid4().hex}"
    original_ticket(database, call_id)
    env = worker_env(database, broker, topic_prefix, tmp_path, {})
    with running("approval-wait", env):
        edited_and_allowed(database, broker, topic_prefix, call_id, 3)

        def refused() -> list[ExecutionResult]:
            results = outbox_payloads(database, f"{topic_prefix}tool.results")
            found = [codec().decode(p, ExecutionResult) for p in results]
            return [r for r in found if r.call_id == call_id]

        [answer] = wait_for_value(refused)
    assert [e.code for e in answer.errors] == ["edit_needs_more_approvals"]
    assert str(answer.outcome.taxonomy_class) == "CONFIRMATION_MISSING"
    own = approval_id_for("acme", call_id, payload_hash(EDITED))
    assert database.sql("SELECT count(*) FROM toolgate.approvals WHERE approval_id = %s", (own,)) == [(0,)]


def wait_for_value(query: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = query()
        if found:
            return found
        time.sleep(0.2)
    raise TimeoutError("nothing arrived")

"""The approver groups the policy names reach the approval stage, through the broker.

A card charge the policy gave to `finance-directors` (`Allow.approver_groups`, as Cedar's
permits set it: contracts/cedar/arguments.cedar) leaves the policy stage as its handler writes it
(`PolicyHandler._allow`, sealed as a stage seals), on tool.authorized of this module's topics on
the session's broker, to a running approval-wait worker on this module's database. Its ticket and
packet name finance-directors, not the contract's first group (finance-controllers), and of two
decisions signed with the demo approvers' real keys and published on tool.approvals.decisions,
bob's (a finance-controller) is refused and never counted, and dave's (a director) counts. With
two groups named, the running worker's sweep escalates the ticket to the policy's second group.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from tests.unit.factories import stage_record
from toolgate.client import ApprovalClient
from toolgate.contracts.registry import load_registry
from toolgate.ops.stack.embedded import Broker
from toolgate.schemas.codec import codec
from toolgate.schemas.hashing import payload_hash
from toolgate.schemas.models import ApprovalRequest, PayloadKind
from toolgate.topics.catalog import Topics
from toolgate.trust.deployment_keys import deployment_keys
from toolgate.trust.integrity import Sealer
from toolgate.trust.signing import Keyring
from toolgate.workers.approval.decision import approval_id_for
from toolgate.workers.policy.case import Allow
from toolgate.workers.policy.handler import PolicyHandler
from toolgate.workers.runtime.emit import Emit, Origin
from toolgate.workers.runtime.handler import Inbound

from .conftest import Database, with_topics
from .stage_workers import running, worker_env

TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def authorized_by_policy(database: Database, broker: Broker, prefix: str, groups: tuple[str, ...]) -> str:
    """A USD 1,250 charge of acme's, allowed for two approvals of `groups`, published on
    tool.authorized as the policy stage publishes it; its call_id."""
    settings = with_topics(database, broker, prefix)
    registry = load_registry()
    charge = registry.resolve("payment.charge_card", "latest")
    arguments = {"invoice_id": "inv_acme0002", "amount_cents": 125000, "currency": "USD"}
    call_id = f"call_{uuid.uuid4().hex}"
    record = stage_record(charge, arguments, call_id=call_id, traceparent=TRACE, payload_hash=payload_hash(arguments))
    validated = Origin("validated", 0, 0, None, [], PayloadKind.STAGE_ITEM)
    out = Emit("policy")
    handler = PolicyHandler(registry, settings)  # its pool is never opened: _allow does no I/O
    call = Inbound(record, codec().encode(record), validated, traceparent=TRACE)
    handler._allow(call, Allow(2, (), approver_groups=groups), int(time.time() * 1000), out)
    topics = Topics(prefix)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for r in out.messages(topics, 1_000_000, Sealer(deployment_keys(settings), topics)):
        producer.produce(r.topic, r.value, r.key, partition=r.partition or 0, headers=r.headers)
    assert producer.flush(10) == 0
    return call_id


def wait_for(database: Database, query: str, params: Any, timeout: float = 30.0) -> list[tuple[Any, ...]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = database.sql(query, params)
        if rows:
            return rows
        time.sleep(0.2)
    raise TimeoutError(query)


def test_a_ticket_of_the_policys_groups_counts_only_their_approvers(
    database: Database, broker: Broker, topic_prefix: str, tmp_path: Path
) -> None:
    env = worker_env(database, broker, topic_prefix, tmp_path, {})
    with running("approval-wait", env):
        call_id = authorized_by_policy(database, broker, topic_prefix, ("finance-directors",))
        approval_id = approval_id_for("acme", call_id)
        [(groups, packet_json, required)] = wait_for(
            database,
            "SELECT approver_groups, packet, required_approvals FROM toolgate.approvals WHERE approval_id = %s",
            (approval_id,),
        )
        packet = ApprovalRequest.model_validate(packet_json)
        assert (groups, packet.approver_groups, required) == (["finance-directors"], ["finance-directors"], 2)
        announced = database.sql(
            "SELECT payload FROM toolgate.outbox WHERE topic LIKE %s", (f"{topic_prefix}tool.approvals.requested.%",)
        )
        sent = [codec().decode(bytes(p), ApprovalRequest) for (p,) in announced]
        assert [p.approver_groups for p in sent if p.approval_id == approval_id] == [["finance-directors"]]

        keyring = Keyring(database.home / "approvers")
        client = ApprovalClient(broker.bootstrap, prefix=topic_prefix, client_id="pytest-approver")
        try:
            bob = client.decide(packet, approver_id="bob", key=keyring.load("bob"), approve=True)
            dave = client.decide(packet, approver_id="dave", key=keyring.load("dave"), approve=True)
        finally:
            client.close()
        judged = "SELECT action, coalesce(detail->>'code', detail->>'status_after') FROM toolgate.audit_log "
        judged += "WHERE detail->>'decision_id' = %s"
        assert wait_for(database, judged, (bob.decision_id,)) == [("decision_refused", "approver_not_in_group")]
        assert wait_for(database, judged, (dave.decision_id,)) == [("decision_counted", "PENDING")]
    counted = "SELECT approver_id FROM toolgate.approval_decisions WHERE approval_id = %s"
    assert database.sql(counted, (approval_id,)) == [("dave",)]
    assert database.sql("SELECT status FROM toolgate.approvals WHERE approval_id = %s", (approval_id,)) == [
        ("PENDING",)
    ]


def test_a_ticket_escalates_through_the_policys_groups_not_the_contracts(
    database: Database, broker: Broker, topic_prefix: str, tmp_path: Path
) -> None:
    """The policy named two groups: the running worker's sweep, once the ticket is due, opens it to
    the second of them (the contract's second group on the code before), and no further."""
    env = worker_env(database, broker, topic_prefix, tmp_path, {})
    with running("approval-wait", env):
        call_id = authorized_by_policy(database, broker, topic_prefix, ("risk-officers", "finance-directors"))
        approval_id = approval_id_for("acme", call_id)
        ticket = "SELECT approver_groups, escalate_at IS NOT NULL FROM toolgate.approvals WHERE approval_id = %s"
        assert wait_for(database, ticket, (approval_id,)) == [(["risk-officers"], True)]
        database.sql("UPDATE toolgate.approvals SET escalate_at = now() WHERE approval_id = %s", (approval_id,))
        escalated = "SELECT approver_groups, escalate_at IS NULL, packet FROM toolgate.approvals "
        escalated += "WHERE approval_id = %s AND escalation_level = 1"
        [(groups, last, packet)] = wait_for(database, escalated, (approval_id,))
    assert (groups, last) == (["risk-officers", "finance-directors"], True)  # no third group to go to
    assert ApprovalRequest.model_validate(packet).approver_groups == ["risk-officers", "finance-directors"]

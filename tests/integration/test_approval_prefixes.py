"""Approval ids typed as prefixes, and several decisions signed at once, on the real Postgres and
broker (issue 52, part 7 and part 4's batch decisions).

store/open_approvals.py's `by_prefix` looks a typed prefix up with LIKE on the escaped prefix: a
`%`, `_` or backslash typed is that character, and at most `limit` ids come back. And
`ApprovalClient.decide_many` publishes one signed decision per packet on tool.approvals.decisions,
each over its own packet, or none at all when one packet's hash is not of its arguments."""

from __future__ import annotations

import time
import uuid
from typing import Any

import psycopg
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from toolgate.client import ApprovalClient
from toolgate.ops.stack.embedded import Broker
from toolgate.schemas.codec import codec
from toolgate.schemas.hashing import payload_hash
from toolgate.schemas.models import ApprovalDecision, ApprovalRequest, Verdict
from toolgate.store.open_approvals import by_prefix
from toolgate.topics.catalog import Topics
from toolgate.trust.signing import PacketMismatch, new_key, public_bytes, verify

from ..unit.factories import sample_models
from .conftest import Database, fresh_topics
from .test_redrive import _ticket

IDS = ["appr_x%y1", "appr_x_y2", "appr_xzy3", "appr_x\\y4", "appr_xzz5", "appr_y6"]


@pytest.fixture(scope="module")
def tickets(database: Database) -> list[str]:
    tag = uuid.uuid4().hex[:6]
    ids = [i.replace("appr_", f"appr_{tag}") for i in IDS]
    with psycopg.connect(database.settings.database_url, autocommit=True) as conn:
        for approval_id in ids:
            _ticket(conn, approval_id, "PENDING", None)
    return ids


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("x%", ["x%y1"]),  # not "x" and anything
        ("x_", ["x_y2"]),  # not "x" and any one character
        ("x\\", ["x\\y4"]),
        ("xz", ["xzy3", "xzz5"]),
        ("xzy3", ["xzy3"]),
        ("q", []),
        ("%", []),
        ("_", []),
    ],
)
def test_a_prefix_is_matched_literally(database: Database, tickets: list[str], typed: str, expected: list[str]) -> None:
    tag = tickets[0][len("appr_") : len("appr_") + 6]
    with psycopg.connect(database.settings.database_url) as conn:
        found = by_prefix(conn, f"appr_{tag}{typed}")
    assert found == sorted(f"appr_{tag}{e}" for e in expected)


def test_a_prefix_lookup_is_bounded(database: Database, tickets: list[str]) -> None:
    tag = tickets[0][len("appr_") : len("appr_") + 6]
    with psycopg.connect(database.settings.database_url) as conn:
        assert len(by_prefix(conn, f"appr_{tag}", limit=3)) == 3
        assert len(by_prefix(conn, f"appr_{tag}", limit=10)) == len(IDS)


def packet(approval_id: str, **arguments: Any) -> ApprovalRequest:
    base: ApprovalRequest = sample_models()[ApprovalRequest]
    p = base.model_copy(update={"approval_id": approval_id, "arguments": {**base.arguments, **arguments}})
    return p.model_copy(update={"payload_hash": payload_hash(p.arguments)})


def published(broker: Broker, prefix: str, expected: int) -> list[ApprovalDecision]:
    """The decisions on the catalog's tool.approvals.decisions: once `expected` are read, or all
    that arrive within a few seconds."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"pytest-{uuid.uuid4().hex}"})
    topic = Topics(prefix).approvals_decisions
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(2)])
    found: list[ApprovalDecision] = []
    deadline = time.monotonic() + 5.0
    try:
        while time.monotonic() < deadline and (expected == 0 or len(found) < expected):
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                found.append(codec().decode(msg.value() or b"", ApprovalDecision))
    finally:
        consumer.close()
    return found


def test_decide_many_publishes_one_signed_decision_per_packet(broker: Broker, topic_prefix: str) -> None:
    key = new_key()
    first, second = (
        packet(f"appr_{uuid.uuid4().hex}", amount_cents=1),
        packet(f"appr_{uuid.uuid4().hex}", amount_cents=2),
    )
    client = ApprovalClient(broker.bootstrap, prefix=topic_prefix, client_id="pytest-approver")
    decisions = client.decide_many([first, second], approver_id="carol", key=key, approve=False, reason="dup")
    assert [d.approval_id for d in decisions] == [first.approval_id, second.approval_id]
    assert [d.payload_hash for d in decisions] == [first.payload_hash, second.payload_hash]
    assert len({d.decision_id for d in decisions}) == 2
    seen = published(broker, topic_prefix, 2)
    assert sorted(d.decision_id for d in seen) == sorted(d.decision_id for d in decisions)
    for d in seen:
        assert d.decision == Verdict.DENY and d.approver_id == "carol" and d.reason == "dup"
        assert verify(d, public_bytes(key))


def test_decide_many_signs_nothing_when_one_packet_does_not_show_its_hash(broker: Broker) -> None:
    prefix = fresh_topics(broker, "prefixes")
    good = packet(f"appr_{uuid.uuid4().hex}")
    bad = packet(f"appr_{uuid.uuid4().hex}").model_copy(update={"arguments": {"amount_cents": 999_999}})
    client = ApprovalClient(broker.bootstrap, prefix=prefix, client_id="pytest-approver")
    with pytest.raises(PacketMismatch):
        client.decide_many([good, bad], approver_id="carol", key=new_key(), approve=True)
    assert published(broker, prefix, 0) == []

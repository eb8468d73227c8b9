"""Records that prove nobody leave bounded audit rows, and a flood of them a bounded number.

On main a 400,000-character call_id header became an audit row as it was (the log is never
pruned, every append signed), one row per record. Now every value an unproven record gives the
audit log is bounded (store/audit_entry.py), and its refusals are collapsed into
counts (workers/runtime/refusals.py): per stage, action, refusal code and source topic, the first
INDIVIDUALLY in a window are one row each and the rest one `refusals_collapsed` row when the
window closes (TOOLGATE_REFUSAL_AUDIT_SECONDS: 60 by default, 15 in the test session; the last
test waits for it, or for two when an earlier test's refusal opened the first).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from toolgate.kafka_security import ADMIN
from toolgate.ops.dlq import read_all
from toolgate.schemas.codec import codec
from toolgate.schemas.models import ApprovalDecision, Verdict
from toolgate.store.audit_entry import MAX_AUDITED
from toolgate.topics.catalog import Topics
from toolgate.workers.runtime.refusals import COLLAPSED, INDIVIDUALLY, SAMPLES

from ..conftest import TEST_ENV, Pipeline, eventually

pytestmark = pytest.mark.timeout(300)

TOPICS = Topics()
HUGE = 1_000_000  # characters of the call_id header: a record of about a megabyte
BIG = 100_000  # characters of each oversized value in a flood's records, far beyond MAX_AUDITED
FLOOD = 100
WINDOW_S = float(TEST_ENV["TOOLGATE_REFUSAL_AUDIT_SECONDS"])  # as the session's toolgate has it
ROW_BOUND = 16 * 1024  # bytes an audit row of an unproven record may take, whatever it carried


@pytest.fixture(scope="module")
def producer(pipeline: Pipeline) -> Iterator[Producer]:
    """A producer that may send records of a few megabytes (the stages' clients fetch them)."""
    # It forges records on internal topics too: on a secured cluster only the admin may write them all.
    made = Producer({**pipeline.kafka(ADMIN), "message.max.bytes": 8_000_000})
    yield made
    made.flush(30)


def send(producer: Producer, topic: str, value: bytes, call_id: str, count: int = 1) -> None:
    for _ in range(count):
        producer.produce(topic, value=value, headers=[("call_id", call_id.encode()), ("tenant_id", b"acme")])
        producer.poll(0)
    assert producer.flush(60) == 0


def newest_id(pipeline: Pipeline) -> int:
    return int(pipeline.sql("SELECT coalesce(max(id), 0) FROM toolgate.audit_log")[0][0])


def rows_since(pipeline: Pipeline, after: int, stage: str, action: str) -> list[tuple[Any, ...]]:
    return pipeline.sql(
        "SELECT call_id, actor, detail, octet_length(call_id), octet_length(detail::text) + octet_length(actor) "
        "FROM toolgate.audit_log WHERE id > %s AND stage = %s AND action = %s ORDER BY id",
        (after, stage, action),
    )


def assert_bounded(rows: list[tuple[Any, ...]]) -> None:
    for call_id, _, detail, call_id_bytes, other_bytes in rows:
        assert call_id is None or call_id_bytes <= MAX_AUDITED, f"an audited call_id of {call_id_bytes} bytes"
        assert other_bytes < ROW_BOUND, f"an audit row of {other_bytes} bytes: {json.dumps(detail)[:200]}"


def test_a_megabyte_call_id_on_a_proposal_and_on_an_internal_topic_is_audited_bounded(
    pipeline: Pipeline, producer: Producer
) -> None:
    after = newest_id(pipeline)
    marker = uuid.uuid4().hex
    huge = f"call_{marker}_" + "x" * HUGE
    send(producer, TOPICS.proposals, b"\xc3\x01 not a proposal " + marker.encode(), huge)
    send(producer, TOPICS.validated, b"not a batch, and no stage MAC " + marker.encode(), huge)
    refused = eventually(lambda: rows_since(pipeline, after, "validation", "refused"), timeout=30)
    forged = eventually(lambda: rows_since(pipeline, after, "policy", "forged_record"), timeout=30)
    assert_bounded(refused + forged)
    assert {r[0] for r in refused + forged} == {None}  # a call_id beyond its bound is not audited at all
    assert not pipeline.sql(
        "SELECT 1 FROM toolgate.audit_log WHERE id > %s AND call_id LIKE %s", (after, f"%{marker}%")
    )


def test_a_flood_of_them_leaves_far_fewer_rows_than_records_and_counts_them(
    pipeline: Pipeline, producer: Producer
) -> None:
    after = newest_id(pipeline)
    big = "y" * BIG
    garbage = f"garbage on executable {uuid.uuid4().hex}".encode()
    send(producer, TOPICS.executable, garbage, big, count=FLOOD)  # execution's intake: no stage MAC
    decision = ApprovalDecision(
        decision_id=f"dec_{uuid.uuid4().hex}",
        approval_id="appr_" + "z" * BIG,  # no ticket: refused before any signature is checked
        decision=Verdict.APPROVE,
        approver_id="a" * BIG,
        tool_name="payment.charge_card",
        tool_version="1.0.0",
        payload_hash="sha256:" + "0" * 64,
        decided_at_ms=0,
        expires_at_ms=0,
        signature=b"",
    )
    send(producer, TOPICS.approvals_decisions, codec().encode(decision), big, count=FLOOD)
    letters = eventually(
        lambda: (n := sum(f.letter.value == garbage for f in read_all(pipeline.settings))) >= FLOOD and n, timeout=60
    )
    assert letters == FLOOD  # every record is still dead-lettered, with its bytes

    def accounted(stage: str, action: str) -> int:
        """Refusals audited one row each, and counted in collapsed rows, since the flood began."""
        alone = len(rows_since(pipeline, after, stage, action))
        return alone + sum(r[2]["collapsed"] for r in rows_since(pipeline, after, stage, COLLAPSED))

    # When a window closes, one row counts the rest (and a few samples, bounded too). Each
    # stage's window opened at its own first refusal, which may have been an earlier test's (the
    # trust-boundary tests forge decisions too): then the flood straddles that window's close and
    # the next, which closes a window's length later. Both are awaited against one deadline.
    eventually(
        lambda: (
            accounted("execution", "forged_record") >= FLOOD and accounted("approval-wait", "decision_refused") >= FLOOD
        ),
        timeout=2 * WINDOW_S + 40,
    )
    for stage, action in (("execution", "forged_record"), ("approval-wait", "decision_refused")):
        alone = rows_since(pipeline, after, stage, action)
        collapsed = rows_since(pipeline, after, stage, COLLAPSED)
        assert alone and collapsed
        assert_bounded(alone + collapsed)
        assert all(len(r[2]["samples"]) <= SAMPLES and r[2]["proven"] is False for r in collapsed)
        # Each window the flood met: its first few one row each, and one row for the rest (the
        # flood may outlast a short window: then a window between closes with a row of its own).
        written = len(alone) + len(collapsed)
        assert len(alone) <= INDIVIDUALLY * (len(collapsed) + 1)
        assert written < FLOOD / 4, f"{written} {stage} audit rows for {FLOOD} records"
        if stage == "approval-wait":
            assert {r[1] for r in alone} == {"unknown"}  # the claimed approver, beyond its bound

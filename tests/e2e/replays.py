"""Capturing and replaying genuine records, as anyone who can read and write toolgate's topics
could: the tests of tests/e2e/test_replayed_records.py and test_stale_records.py use these.

A replayed call is not the only copy of a call toolgate may be given: the client publishes a call
again when no answer came in time (client/resend.py), its producer may publish one twice (it is
not idempotent: client/edge.py), and a round takes whatever came, so a captured batch may carry
a call and its copy. Each copy of a call that does not wait for an approval gets a final answer
of its own (docs/architecture.md, "One final observation per identifiable proposal"); `published`
and `carried` count them.
"""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any, NamedTuple

from confluent_kafka import Consumer, TopicPartition

from toolgate.client import Proposed
from toolgate.kafka_security import ADMIN
from toolgate.schemas.codec import DecodeError, codec
from toolgate.schemas.models import StageBatch, StageRecord
from toolgate.topics.catalog import Topics
from toolgate.topics.headers import CALL_ID, header

from ..conftest import Pipeline

TOPICS = Topics()


@dataclass(frozen=True)
class Captured:
    """One record exactly as it was on its topic."""

    topic: str
    partition: int
    key: bytes | None
    value: bytes
    headers: list[tuple[str, bytes]]


def _consumer(pipeline: Pipeline) -> Consumer:
    """A reader of internal topics: on a secured cluster, as the admin (an insider who captures)."""
    return Consumer(
        {
            **pipeline.kafka(ADMIN),
            "group.id": f"pytest-capture-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
        }
    )


def ends(pipeline: Pipeline, logical: str) -> dict[int, int]:
    """Where each partition of a topic ends now (the embedded broker may under-count: reading
    from here may read a few older records again, never miss a newer one)."""
    topic = TOPICS.name(logical)
    consumer = _consumer(pipeline)
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
    finally:
        consumer.close()


def _copies_in(value: bytes, call_id: str) -> int:
    """How many copies of the call a StageBatch carries (0: none, or not a StageBatch)."""
    try:
        batch = codec().decode(value, StageBatch)
        return sum(codec().decode(item, StageRecord).call.call_id == call_id for item in batch.items)
    except DecodeError:
        return 0


def _has_call(value: bytes, call_id: str) -> bool:
    return _copies_in(value, call_id) > 0


def capture(pipeline: Pipeline, logical: str, since: dict[int, int], call_id: str, timeout: float = 30.0) -> Captured:
    """The batch on an internal topic that carried `call_id`, read from `since` (`ends`)."""
    topic = TOPICS.name(logical)
    consumer = _consumer(pipeline)
    consumer.assign([TopicPartition(topic, p, o) for p, o in since.items()])
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error() or not _has_call(msg.value() or b"", call_id):
                continue
            headers = [(k, v or b"") for k, v in msg.headers() or []]
            return Captured(topic, msg.partition() or 0, msg.key(), msg.value() or b"", headers)
    finally:
        consumer.close()
    raise TimeoutError(f"no {logical} record carried {call_id}")


class Drafted(NamedTuple):
    """A draft created under an idempotency key of its own, and the batch that took it to execution."""

    key: str
    sent: Proposed
    first: dict[str, Any]  # its final observation, SUCCESS
    captured: Captured  # the tool.executable batch that carried it
    proposed: dict[int, int]  # where tool.proposals ended before it was proposed (`published`)


def drafted(pipeline: Pipeline, draft: dict[str, Any], again: bool = False) -> Drafted:
    """invoice.create_draft of `draft` under a new key, answered SUCCESS, its batch captured.
    `again`: published a second time at once, as `wait` does when no answer came in time."""
    key = f"draft-{uuid.uuid4().hex}"
    proposed, since = ends(pipeline, "proposals"), ends(pipeline, "executable")
    sent = pipeline.propose("invoice.create_draft", draft, idempotency_key=key)
    if again:
        pipeline.client.resend(sent)
    first = pipeline.wait(sent)
    assert first["status"]["taxonomy_class"] == "SUCCESS", first
    return Drafted(key, sent, first, capture(pipeline, "executable", since, sent.call_id), proposed)


def replay(pipeline: Pipeline, record: Captured) -> None:
    """The captured record again, byte for byte, to where it was: by an insider who may write
    there (on a secured cluster, nobody but the stage that wrote it and the admin may)."""
    pipeline.insider.publish_raw(record.topic, record.key, record.value, record.headers, record.partition)
    pipeline.insider.flush()


def carried(record: Captured, call_id: str) -> int:
    """How many copies of the call a captured batch carries: each is answered when it is replayed."""
    return _copies_in(record.value, call_id)


def published(pipeline: Pipeline, since: dict[int, int], call_id: str, timeout: float = 30.0) -> int:
    """How many times the call was published on tool.proposals from `since` (`ends`) to where the
    topic ends now: by `propose`, by each re-publishing of `wait`, by a produce retried."""
    topic = TOPICS.name("proposals")
    consumer = _consumer(pipeline)
    try:
        until = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in since}
        left = {p for p, end in until.items() if end > since[p]}
        consumer.assign([TopicPartition(topic, p, since[p]) for p in sorted(left)])
        count = 0
        deadline = time.monotonic() + timeout
        while left:
            if time.monotonic() > deadline:
                raise TimeoutError(f"tool.proposals not read to its end: partitions {sorted(left)} left")
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            partition, offset = msg.partition() or 0, msg.offset() or 0
            if offset < until[partition]:
                count += header(msg.headers() or [], CALL_ID) == call_id
            if offset >= until[partition] - 1:
                left.discard(partition)
        return count
    finally:
        consumer.close()


def finals(pipeline: Pipeline, tenant: str, call_id: str) -> list[dict[str, Any]]:
    """Every final observation of a call on its tenant's topic, in order."""
    seen = pipeline.client.observations(tenant_id=tenant, call_ids=[call_id], idle_timeout=1.5)
    return [o.as_json() for o in seen if o.is_final]


def answers(
    pipeline: Pipeline, sent: Proposed, proposed: dict[int, int], replayed: Captured
) -> tuple[list[dict[str, Any]], int] | None:
    """The call's final observations, and how many copies of it toolgate was given (`published`
    from `proposed`, the ends of tool.proposals before it was, and those `replayed` carries),
    once there are as many answers as copies; else None."""
    seen = finals(pipeline, sent.tenant_id, sent.call_id)  # read first: each copy answered was published before
    given = published(pipeline, proposed, sent.call_id) + carried(replayed, sent.call_id)
    return (seen, given) if len(seen) >= given else None


def made_ms(observation: dict[str, Any]) -> int:
    """When an answer was made (its execution_metadata.timestamp, RFC 3339 to the millisecond)."""
    made = dt.datetime.fromisoformat(observation["execution_metadata"]["timestamp"].replace("Z", "+00:00"))
    return round(made.timestamp() * 1000)


def told(observations: list[dict[str, Any]]) -> list[tuple[str, str, bool]]:
    """What each answer said and when: to read in a failed assertion."""
    return [
        (
            o["execution_metadata"]["timestamp"],
            o["status"]["taxonomy_class"],
            o["execution_metadata"]["idempotency_hit"],
        )
        for o in observations
    ]


def one_answer_a_copy(seen: list[dict[str, Any]], given: int) -> None:
    """Each copy of a call got one final answer, delivered at least once (a repeat is the same
    answer: docs/architecture.md, "One final observation per identifiable proposal"): no fewer
    answers than copies, and no more different ones."""
    different = {json.dumps(o, sort_keys=True) for o in seen}
    assert len(different) <= given <= len(seen), (given, told(seen))

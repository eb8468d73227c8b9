"""Capturing and replaying genuine records, as anyone who can read and write toolgate's topics
could: the tests of tests/e2e/test_replayed_records.py and test_stale_records.py use these."""

from __future__ import annotations

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


def _has_call(value: bytes, call_id: str) -> bool:
    try:
        batch = codec().decode(value, StageBatch)
        return any(codec().decode(item, StageRecord).call.call_id == call_id for item in batch.items)
    except DecodeError:
        return False


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


def drafted(pipeline: Pipeline, draft: dict[str, Any]) -> Drafted:
    """invoice.create_draft of `draft` under a new key, answered SUCCESS, its batch captured."""
    key = f"draft-{uuid.uuid4().hex}"
    since = ends(pipeline, "executable")
    sent = pipeline.propose("invoice.create_draft", draft, idempotency_key=key)
    first = pipeline.wait(sent)
    assert first["status"]["taxonomy_class"] == "SUCCESS", first
    return Drafted(key, sent, first, capture(pipeline, "executable", since, sent.call_id))


def replay(pipeline: Pipeline, record: Captured) -> None:
    """The captured record again, byte for byte, to where it was: by an insider who may write
    there (on a secured cluster, nobody but the stage that wrote it and the admin may)."""
    pipeline.insider.publish_raw(record.topic, record.key, record.value, record.headers, record.partition)
    pipeline.insider.flush()


def finals(pipeline: Pipeline, tenant: str, call_id: str) -> list[dict[str, Any]]:
    """Every final observation of a call on its tenant's topic, in order."""
    seen = pipeline.client.observations(tenant_id=tenant, call_ids=[call_id], idle_timeout=1.5)
    return [o.as_json() for o in seen if o.is_final]

"""The gauges' dead-letter tally (ops/gauge_readers.py) where a log's beginning moves, on Apache
Kafka: the letters retention removed (the dead-letter topic keeps them 30 days) or an operator
deleted are no longer counted, as `toolgate status` and `toolgate dlq list` no longer count them."""

from __future__ import annotations

import secrets
import uuid

import pytest
from confluent_kafka import OFFSET_END, TopicPartition
from confluent_kafka.admin import AdminClient

from toolgate.kafka_security import ADMIN
from toolgate.ops.gauge_readers import Readers
from toolgate.topics.catalog import Topics

from ..conftest import Pipeline, session_broker
from ..integration.test_gauge_readers import agree

pytestmark = pytest.mark.skipif(
    session_broker()[0] != "kafka", reason="the embedded Tansu removes no records: no retention, no DeleteRecords"
)


def test_letters_the_broker_no_longer_holds_are_no_longer_tallied(pipeline: Pipeline) -> None:
    # Before, the tally kept every letter it had read: the gauge of open dead letters went on
    # counting what retention had removed, while `toolgate status` counted the topic as it is.
    readers = Readers(pipeline.settings)
    try:
        run_id = f"run_{uuid.uuid4().hex[:10]}"
        pipeline.client.publish_raw(Topics().proposals, run_id.encode(), secrets.token_bytes(48))
        pipeline.client.flush()
        assert agree(pipeline, readers) >= 1
        topic = Topics().deadletter
        admin = AdminClient(pipeline.kafka(ADMIN))
        partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions
        removed = admin.delete_records([TopicPartition(topic, p, OFFSET_END) for p in partitions])
        for done in removed.values():
            done.result(30)  # every record of the topic so far removed, as retention would
        assert agree(pipeline, readers, 0) == 0
    finally:
        readers.close()
